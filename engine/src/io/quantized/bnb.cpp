// bitsandbytes 4-bit (quant_method "bitsandbytes", load_in_4bit; Params4bit as transformers saves
// it): `W.weight` U8 [ceil(n/2), 1] packs two 4-bit codes per byte, the first element in the high
// nibble; `W.weight.absmax` is one scale per `blocksize` elements in storage order, float32, or
// with double quantization U8 codes into `W.weight.nested_quant_map` (256 float32) scaled by
// `W.weight.nested_absmax` (float32 per `nested_blocksize` absmax) plus `nested_offset`;
// `W.weight.quant_map` is the 16-entry NF4 / FP4 table; `W.weight.quant_state.bitsandbytes__nf4`
// (or __fp4) is JSON bytes with quant_type, blocksize, dtype, shape and the nested fields.
// As bitsandbytes' dequantize_4bit on the CPU: the absmax is dequantized in float32 (code times
// nested absmax, then + offset in float32, the offset being the JSON number as a float32), each
// value is table[code] * absmax in float32, rounded to the quant state's dtype.
#include <cmath>

#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

namespace {

json quant_state_json(const Entry& e) {
  expect_dtype(e, {"U8"}, "the bitsandbytes quant state");
  const Tensor t = raw(e);
  const char* p = static_cast<const char*>(t.data());
  json j = json::parse(std::string(p, p + t.numel()), nullptr, false);
  if (!j.is_object()) throw Error(where_entry(e) + "the bitsandbytes quant state is not JSON");
  return j;
}

int64_t positive_int(const json& j, const char* key, const Entry& e) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    throw Error(where_entry(e) + "the bitsandbytes quant state has no positive integer \"" + key +
                "\"");
  return j[key].get<int64_t>();
}

std::string torch_dtype(const json& j, const char* key, const Entry& e) {
  const std::string d = j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
  if (d == "float32") return "F32";
  if (d == "bfloat16") return "BF16";
  if (d == "float16") return "F16";
  throw Error(where_entry(e) + "the bitsandbytes quant state's \"" + key + "\" is '" + d +
              "'; expected float32, bfloat16 or float16");
}

void expect_len(const Entry& e, int64_t n, const char* role) {
  if (numel(e.info.shape) != n)
    throw Error(where_entry(e) + role + " has " + std::to_string(numel(e.info.shape)) +
                " elements; expected " + std::to_string(n));
}

}  // namespace

void fold_bnb(const Source& src, Parts& parts) {
  if (src.q.value("load_in_8bit", false))
    throw Error("'" + src.file +
                "': bitsandbytes LLM.int8 (load_in_8bit) checkpoints are not read; "
                "bitsandbytes 4-bit (load_in_4bit) is");
  const std::string key = ".quant_state.bitsandbytes__";
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& qs = parts.at(i);
    const std::string& qn = qs.info.name;
    const size_t at = qn.rfind(key);
    if (at == std::string::npos) continue;
    const std::string kind = qn.substr(at + key.size());
    if (kind != "nf4" && kind != "fp4")
      throw Error(where_entry(qs) + "unknown bitsandbytes quant type '" + kind + "'");
    const std::string wn = qn.substr(0, at);
    const json j = quant_state_json(qs);
    if (j.value("quant_type", std::string()) != kind)
      throw Error(where_entry(qs) + "the quant state says quant_type '" +
                  j.value("quant_type", std::string()) + "' but its name says " + kind);
    const int64_t bs = positive_int(j, "blocksize", qs);
    const std::string out_dtype = torch_dtype(j, "dtype", qs);
    if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty())
      throw Error(where_entry(qs) + "the bitsandbytes quant state has no shape");
    Shape shape;
    for (const json& d : j["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw Error(where_entry(qs) + "the bitsandbytes quant state's shape is not integers");
      shape.push_back(d.get<int64_t>());
    }
    const int64_t n = numel(shape);
    const Entry& w = parts.need(wn, wn, src);
    const Entry& am = parts.need(wn + ".absmax", wn, src);
    const Entry& qm = parts.need(wn + ".quant_map", wn, src);
    expect_dtype(w, {"U8"}, "the bitsandbytes 4-bit codes");
    expect_len(w, (n + 1) / 2, "the bitsandbytes 4-bit codes");
    expect_dtype(qm, {"F32"}, "the bitsandbytes quant_map");
    expect_len(qm, 16, "the bitsandbytes quant_map");
    const int64_t blocks = (n + bs - 1) / bs;
    expect_len(am, blocks, "the bitsandbytes absmax");
    std::vector<const Entry*> used = {&w, &am, &qm, &qs};
    const bool nested = j.contains("nested_blocksize") || parts.find(wn + ".nested_absmax");
    int64_t nbs = 0;
    float offset = 0;
    Entry nam, nqm;
    if (nested) {
      nbs = positive_int(j, "nested_blocksize", qs);
      if (torch_dtype(j, "nested_dtype", qs) != "F32")
        throw Error(where_entry(qs) + "nested_dtype is not float32");
      if (!j.contains("nested_offset") || !j["nested_offset"].is_number())
        throw Error(where_entry(qs) + "the bitsandbytes quant state has no nested_offset");
      offset = static_cast<float>(j["nested_offset"].get<double>());
      nam = parts.need(wn + ".nested_absmax", wn, src);
      nqm = parts.need(wn + ".nested_quant_map", wn, src);
      expect_dtype(am, {"U8"}, "the double-quantized absmax");
      expect_dtype(nam, {"F32"}, "the bitsandbytes nested_absmax");
      expect_len(nam, (blocks + nbs - 1) / nbs, "the bitsandbytes nested_absmax");
      expect_dtype(nqm, {"F32"}, "the bitsandbytes nested_quant_map");
      expect_len(nqm, 256, "the bitsandbytes nested_quant_map");
      used.push_back(parts.find(wn + ".nested_absmax"));
      used.push_back(parts.find(wn + ".nested_quant_map"));
    } else {
      expect_dtype(am, {"F32"}, "the bitsandbytes absmax");
    }
    const Entry we = w, ae = am, qe = qm;
    auto load = [we, ae, qe, nam, nqm, nested, n, bs, nbs, offset, blocks, shape, out_dtype] {
      const Tensor codes = raw(we), amt = raw(ae), map = raw(qe);
      std::vector<float> absmax(static_cast<size_t>(blocks));
      if (nested) {
        const Tensor a2 = raw(nam), m2 = raw(nqm);
        const uint8_t* a = amt.ptr<uint8_t>();
        for (int64_t b = 0; b < blocks; ++b)
          absmax[b] = m2.ptr<float>()[a[b]] * a2.ptr<float>()[b / nbs] + offset;
      } else {
        for (int64_t b = 0; b < blocks; ++b) absmax[b] = amt.ptr<float>()[b];
      }
      const float* table = map.ptr<float>();
      const uint8_t* c = codes.ptr<uint8_t>();
      Tensor out = Tensor::uninitialized(DType::F32, shape);
      float* o = out.mutable_ptr<float>();
      for (int64_t k = 0; k < n; ++k) {
        const uint8_t byte = c[k / 2];
        const unsigned q = (k & 1) ? byte & 15u : byte >> 4;
        o[k] = round_to(table[q] * absmax[k / bs], out_dtype);
      }
      return out;
    };
    const std::string upper = kind == "nf4" ? "NF4" : "FP4";
    std::string fmt = "bitsandbytes " + upper + ": 4-bit codes into its " + upper +
                      " table with an absmax per " + std::to_string(bs) + " values";
    fmt += nested ? " (8-bit, itself scaled by a float32 per " + std::to_string(nbs) + ")"
                  : " (float32)";
    const size_t wi = static_cast<size_t>(&w - &parts.at(0));
    parts.fold(wi,
               logical_weight(wn, shape, out_dtype, used, "bitsandbytes " + kind, "", fmt, load));
  }
}

}  // namespace castscope::io::detail::quantized
