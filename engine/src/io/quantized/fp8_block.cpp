// Block FP8 (DeepSeek-V3 / R1, Qwen3-FP8; transformers' "fine-grained FP8"): `W.weight` F8_E4M3
// [..., out, in] and `W.weight_scale_inv` F32 [..., ceil(out/bh), ceil(in/bw)], multiplied in
// dequantization. transformers' Fp8Dequantize multiplies in float32 and returns float32 for a
// float32 scale (then the model's dtype when it loads into a module); load() gives that product.
#include <cmath>

#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

void fold_fp8_block(const Source& src, Parts& parts) {
  int64_t bh = 0, bw = 0;
  if (src.q.contains("weight_block_size") && !src.q["weight_block_size"].is_null()) {
    const json& b = src.q["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
      throw Error("'" + src.file + "': weight_block_size is not a pair of positive integers");
    bh = b[0].get<int64_t>();
    bw = b[1].get<int64_t>();
  }
  const std::string suffix = "_scale_inv";
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& sc = parts.at(i);
    if (!ends_with(sc.info.name, suffix)) continue;
    const std::string wname = sc.info.name.substr(0, sc.info.name.size() - suffix.size());
    const Entry* w = parts.find(wname);
    if (!w) throw Error(where_entry(sc) + "a block-FP8 scale without its weight '" + wname + "'");
    expect_dtype(*w, {"F8_E4M3"}, "the block-FP8 weight");
    expect_dtype(sc, {"F32", "BF16"}, "the block-FP8 scale");
    const Shape ws = w->info.shape, ss = sc.info.shape;
    const int r = static_cast<int>(ws.size());
    if (r < 2) throw Error(where_entry(*w) + "a block-FP8 weight needs at least 2 axes");
    int64_t th = bh, tw = bw;
    const bool per_tensor = numel(ss) == 1 && (bh == 0 || ss.size() <= 1);
    if (!per_tensor) {
      if (th == 0)
        throw Error("'" + src.file + "': quant_method fp8 without weight_block_size, but '" +
                    sc.info.name + "' is not one per-tensor scale");
      Shape want(ws.begin(), ws.end() - 2);
      want.push_back((ws[r - 2] + th - 1) / th);
      want.push_back((ws[r - 1] + tw - 1) / tw);
      if (ss != want)
        throw Error(where_entry(sc) + "scale shape " + shape_str(ss) + " does not tile weight " +
                    shape_str(ws) + " in " + std::to_string(th) + "x" + std::to_string(tw) +
                    " blocks (expected " + shape_str(want) + ")");
    }
    const std::string sd = sc.info.dtype;
    const std::string dtype = per_tensor ? "e4m3fn_" + scale_spec(sd)
                                         : "e4m3fn_" + scale_spec(sd) + "_t" + std::to_string(th) +
                                               "_t" + std::to_string(tw);
    const Entry wc = *w, scc = sc;
    const std::string out_dtype = sd == "F32" ? "F32" : "BF16";
    auto load = [wc, scc, per_tensor, th, tw, out_dtype] {
      const Tensor codes = raw(wc).to_f32(), scale = raw(scc);
      const Shape& s = wc.info.shape;
      const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
      const int64_t sr = (rows + th - 1) / std::max<int64_t>(th, 1),
                    scn = (cols + tw - 1) / std::max<int64_t>(tw, 1);
      const int64_t mats = rows > 0 && cols > 0 ? codes.numel() / (rows * cols) : 0;
      Tensor out = Tensor::uninitialized(DType::F32, s);
      const float* c = codes.ptr<float>();
      float* o = out.mutable_ptr<float>();
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t y = 0; y < rows; ++y)
          for (int64_t x = 0; x < cols; ++x) {
            const int64_t k = (m * rows + y) * cols + x;
            const float f =
                per_tensor ? scale_at(scale, 0) : scale_at(scale, (m * sr + y / th) * scn + x / tw);
            o[k] = round_to(c[k] * f, out_dtype);
          }
      return out;
    };
    const std::string fmt =
        per_tensor ? "FP8 E4M3 with one " + scale_spec(sd) + " scale (multiplied)"
                   : "FP8 E4M3 with a " + scale_spec(sd) + " scale per " + std::to_string(th) +
                         "x" + std::to_string(tw) + " block (multiplied)";
    const size_t wi = static_cast<size_t>(w - &parts.at(0));
    const std::string out = sd == "F32" ? "F32" : "BF16";
    parts.fold(wi, logical_weight(wname, ws, out, {w, &sc}, "fp8-block", datatype_if_known(dtype),
                                  fmt, load));
  }
  // An FP8 weight left over has lost its scale: its codes alone are not its values.
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts.taken(i) && parts.at(i).info.dtype == "F8_E4M3")
      throw Error(where_entry(parts.at(i)) + "an FP8 weight without its companion '" +
                  parts.at(i).info.name + "_scale_inv' (" + src.file + " says quant_method fp8)");
}

}  // namespace castscope::io::detail::quantized
