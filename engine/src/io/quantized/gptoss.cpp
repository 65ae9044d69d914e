// gpt-oss MXFP4 (quant_method "mxfp4"): experts `NAME_blocks` U8 [E, R, G, 16] (32 E2M1 codes per
// block, element 2i in the low nibble) and `NAME_scales` U8 [E, R, G] (E8M0, bias 127). As
// transformers' convert_moe_packed_tensors: the bfloat16 code times the float32 2^(e-127)
// (torch.ldexp), rounded to bfloat16, rows [E, R, G*32] transposed to [E, G*32, R].
#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

void fold_gptoss(const Source& src, Parts& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& b = parts.at(i);
    const std::string& n = b.info.name;
    if (!ends_with(n, "_blocks")) continue;
    const std::string base = n.substr(0, n.size() - 7);
    const Entry& s = parts.need(base + "_scales", base, src);
    expect_dtype(b, {"U8"}, "MXFP4 blocks");
    expect_dtype(s, {"U8"}, "MXFP4 E8M0 scales");
    const Shape bs = b.info.shape;
    if (bs.size() != 4 || bs[3] != 16)
      throw Error(where_entry(b) + "MXFP4 blocks have shape " + shape_str(bs) +
                  "; expected [E, rows, blocks, 16]");
    expect_shape(s, Shape(bs.begin(), bs.end() - 1), "MXFP4 scales");
    const int64_t E = bs[0], R = bs[1], G = bs[2], H = G * 32;
    const Shape shape = {E, H, R};
    const Entry be = b, se = s;
    auto load = [be, se, E, R, G, H, shape] {
      const Tensor blk = raw(be), sc = raw(se);
      const uint8_t* bp = blk.ptr<uint8_t>();
      const uint8_t* sp = sc.ptr<uint8_t>();
      Tensor out = Tensor::uninitialized(DType::F32, shape);
      float* o = out.mutable_ptr<float>();
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t g = 0; g < G; ++g) {
            const int64_t row = (e * R + r) * G + g;
            const float f = e8m0(sp[row]);
            for (int64_t k = 0; k < 32; ++k) {
              const uint8_t byte = bp[row * 16 + k / 2];
              const float q = e2m1((k & 1) ? byte >> 4 : byte & 15);
              o[(e * H + g * 32 + k) * R + r] = round_to(q * f, "BF16");
            }
          }
      return out;
    };
    parts.fold(i, logical_weight(
                      base, shape, "BF16", {&b, &s}, "gpt-oss mxfp4",
                      datatype_if_known("e2m1fnuz_e8m0_t32"),
                      "MXFP4: E2M1 with an E8M0 scale per 32 inputs (experts [E, in, out])", load));
  }
}

}  // namespace castscope::io::detail::quantized
