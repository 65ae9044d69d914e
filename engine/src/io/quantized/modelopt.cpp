// NVIDIA ModelOpt's Hugging Face export (hf_quant_config.json, or quant_method "modelopt"):
// NVFP4 `weight` U8 [out, in/2] (low nibble first), `weight_scale` F8_E4M3 per 16 inputs,
// `weight_scale_2` F32 = amax / (6 * 448); FP8 `weight` F8_E4M3 with an F32 `weight_scale`.
// NVFP4 values follow compressed-tensors' ModelOpt converter and its NVFP4 decompression:
// global = 1 / weight_scale_2 in float32, scale / global (in bfloat16 for ModelOpt's 0-dim
// weight_scale_2, as PyTorch promotes), the product rounded to bfloat16. FP8 values are the float32
// product code * weight_scale.
#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

void fold_modelopt(const Source& src, Parts& parts) {
  std::string algo = src.q.value("quant_algo", std::string());
  for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const bool nv = algo.rfind("NVFP4", 0) == 0;
  if (!nv && algo != "FP8")
    throw Error("'" + src.file + "': ModelOpt quant_algo '" + algo +
                "' is not read (NVFP4 and FP8 are)");
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& ws = parts.at(i);
    if (!ends_with(ws.info.name, ".weight_scale")) continue;
    const std::string p = ws.info.name.substr(0, ws.info.name.size() - 13), wn = p + ".weight";
    const Entry& w = parts.need(wn, wn, src);
    const size_t wi = static_cast<size_t>(&w - &parts.at(0));
    std::vector<const Entry*> used = {&w, &ws};
    for (const char* a : {"input_scale", "pre_quant_scale", "k_scale", "v_scale"})
      parts.drop(p + "." + a);
    if (nv) {
      expect_dtype(w, {"U8"}, "the NVFP4 weight");
      expect_dtype(ws, {"F8_E4M3"}, "the NVFP4 weight_scale");
      const Entry& s2 = parts.need(p + ".weight_scale_2", wn, src);
      expect_dtype(s2, {"F32"}, "weight_scale_2");
      if (numel(s2.info.shape) != 1)
        throw Error(where_entry(s2) + "weight_scale_2 has shape " + shape_str(s2.info.shape));
      used.push_back(&s2);
      const Shape ps = w.info.shape;
      if (ps.size() != 2) throw Error(where_entry(w) + "the NVFP4 weight must be a matrix");
      const int64_t rows = ps[0], cols = ps[1] * 2;
      if (cols % 16 || ws.info.shape != Shape{rows, cols / 16})
        throw Error(where_entry(ws) + "scale shape " + shape_str(ws.info.shape) +
                    " does not tile the [" + std::to_string(rows) + ", " + std::to_string(cols) +
                    "] weight in groups of 16 (expected [" + std::to_string(rows) + ", " +
                    std::to_string(cols / 16) + "])");
      const Entry we = w, se = ws, s2e = s2;
      // PyTorch divides a bfloat16 tensor by a 0-dim float32 one in bfloat16, by a [1] one in
      // float32: ModelOpt's scalar weight_scale_2 rounds the scale ratio to bfloat16.
      const std::string ratio = s2.info.shape.empty() ? "BF16" : "F32";
      auto load = [we, se, s2e, rows, cols, ratio] {
        const Tensor pk = raw(we), s = raw(se);
        const float global = 1.0f / scale_at(raw(s2e), 0);
        const uint8_t* pp = pk.ptr<uint8_t>();
        Tensor out = Tensor::uninitialized(DType::F32, {rows, cols});
        float* o = out.mutable_ptr<float>();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t k = r * cols + j;
            const uint8_t b = pp[k / 2];
            const float q = e2m1((j & 1) ? b >> 4 : b & 15);
            o[k] = round_to(q * round_to(scale_at(s, r * (cols / 16) + j / 16) / global, ratio),
                            "BF16");
          }
        return out;
      };
      parts.fold(wi, logical_weight(wn, {rows, cols}, "BF16", used, "modelopt nvfp4",
                                    datatype_if_known("nvfp4"),
                                    "NVFP4: E2M1 with an E4M3 scale per 16 and a float32 "
                                    "weight_scale_2 (amax/(6*448), multiplied)",
                                    load));
    } else {
      expect_dtype(w, {"F8_E4M3"}, "the FP8 weight");
      expect_dtype(ws, {"F32"}, "the FP8 weight_scale");
      if (numel(ws.info.shape) != 1)
        throw Error(where_entry(ws) + "a per-tensor FP8 scale has shape " +
                    shape_str(ws.info.shape));
      const Entry we = w, se = ws;
      auto load = [we, se] {
        const Tensor q = raw(we).to_f32();
        const float f = scale_at(raw(se), 0);
        Tensor out = Tensor::uninitialized(DType::F32, we.info.shape);
        float* o = out.mutable_ptr<float>();
        for (int64_t k = 0; k < q.numel(); ++k) o[k] = q.ptr<float>()[k] * f;
        return out;
      };
      parts.fold(wi, logical_weight(wn, w.info.shape, "F32", used, "modelopt fp8",
                                    datatype_if_known("e4m3fn_float32"),
                                    "FP8 E4M3 with one float32 scale", load));
    }
  }
}

}  // namespace castscope::io::detail::quantized
