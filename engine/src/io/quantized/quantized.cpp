// Recognising a quantized checkpoint and the pieces every convention shares.
#include "io/quantized/quantized.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "castscope/datatype.hpp"

namespace castscope::io::detail::quantized {

namespace fs = std::filesystem;

Parts::Parts(std::vector<Entry>& entries) : entries_(entries), state_(entries.size(), 0) {
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].info.name, i);
}

const Entry* Parts::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const Entry& Parts::need(const std::string& name, const std::string& weight,
                         const Source& src) const {
  const Entry* e = find(name);
  if (!e)
    throw Error("tensor '" + weight + "': its companion '" + name + "' is missing (" + src.file +
                " says the checkpoint is " + src.method + ")");
  return *e;
}

void Parts::fold(size_t codes, Entry logical) {
  for (const std::string& p : logical.info.stored.parts) {
    auto it = index_.find(p);
    if (it != index_.end() && it->second != codes) state_[it->second] = 2;
  }
  state_[codes] = 1;
  logical_[codes] = std::move(logical);
}

void Parts::drop(const std::string& name) {
  auto it = index_.find(name);
  if (it != index_.end() && state_[it->second] == 0) state_[it->second] = 2;
}

std::vector<Entry> Parts::result() {
  std::vector<Entry> out;
  out.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (state_[i] == 1)
      out.push_back(std::move(logical_[i]));
    else if (state_[i] == 0)
      out.push_back(std::move(entries_[i]));
  }
  return out;
}

std::string where_entry(const Entry& e) {
  return where(e.info.file, e.info.name);
}

void expect_dtype(const Entry& e, std::initializer_list<const char*> dtypes, const char* role) {
  std::string list;
  for (const char* d : dtypes) {
    if (e.info.dtype == d) return;
    list += list.empty() ? d : std::string(" or ") + d;
  }
  throw Error(where_entry(e) + role + " is " + e.info.dtype + "; expected " + list);
}

void expect_shape(const Entry& e, const Shape& want, const char* role) {
  if (e.info.shape != want)
    throw Error(where_entry(e) + role + " has shape " + shape_str(e.info.shape) + "; expected " +
                shape_str(want));
}

Tensor raw(const Entry& e) {
  if (!e.raw) throw Error(where_entry(e) + "has no stored dtype to read codes from");
  return e.raw();
}

Entry logical_weight(const std::string& name, const Shape& shape, const std::string& dequant_dtype,
                     const std::vector<const Entry*>& parts, const std::string& convention,
                     const std::string& datatype, const std::string& format,
                     std::function<Tensor()> load) {
  Entry e;
  e.info.name = name;
  e.info.dtype = dequant_dtype;
  e.info.shape = shape;
  e.info.file = parts.front()->info.file;
  StoredQuant& s = e.info.stored;
  s.convention = convention;
  s.datatype = datatype;
  s.format = format;
  for (const Entry* p : parts) {
    s.parts.push_back(p->info.name);
    s.stored_bytes += p->info.nbytes;
  }
  e.info.nbytes = s.stored_bytes;
  const int64_t n = numel(shape);
  s.bits_per_weight = n > 0 ? 8.0 * static_cast<double>(s.stored_bytes) / n : 0;
  e.load = std::move(load);
  const std::string file = e.info.file;
  e.raw = [file, name, convention]() -> Tensor {
    throw Error(where(file, name) + "stored quantized (" + convention +
                "), which has no plain dtype; load() gives its dequantized values");
  };
  return e;
}

std::string datatype_if_known(const std::string& spec) {
  try {
    DataType::parse(spec);
    return spec;
  } catch (const Error&) {
    return "";
  }
}

std::string scale_spec(const std::string& d) {
  if (d == "F32") return "float32";
  if (d == "BF16") return "bfloat16";
  if (d == "F16") return "float16";
  if (d == "F8_E4M3") return "e4m3fn";
  if (d == "U8") return "e8m0";
  return d;
}

float round_to(float v, const std::string& dtype) {
  if (dtype == "BF16") return bf16_to_float(float_to_bf16(v));
  if (dtype == "F16") return half_to_float(float_to_half(v));
  return v;
}

float scale_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.ptr<float>()[i];
    case DType::BF16:
      return bf16_to_float(t.ptr<uint16_t>()[i]);
    case DType::F16:
      return half_to_float(t.ptr<uint16_t>()[i]);
    default: {
      // Rare scale dtypes (F8_E4M3 NVFP4 group scales) go through the exact conversion.
      float v;
      const Tensor one = Tensor::borrow(
          t.dtype(), {1}, nullptr,
          static_cast<const uint8_t*>(t.data()) + static_cast<size_t>(i) * dtype_size(t.dtype()));
      std::memcpy(&v, one.to_f32().data(), sizeof v);
      return v;
    }
  }
}

float e8m0(uint8_t e) {
  return e == 255 ? INFINITY : std::ldexp(1.0f, static_cast<int>(e) - 127);
}

float e2m1(unsigned nibble) {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[nibble & 7];
  return (nibble & 8) ? -m : m;
}

namespace {

json read_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > (16u << 20)) return json();
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

// The quantization a checkpoint declares: config.json's quantization_config (or
// compression_config, its older name), else ModelOpt's hf_quant_config.json.
bool read_source(const std::string& dir, Source& src) {
  const json cfg = read_json(fs::path(dir) / "config.json");
  if (cfg.is_object()) {
    for (const char* key : {"quantization_config", "compression_config"}) {
      if (!cfg.contains(key) || cfg[key].is_null()) continue;
      src.q = cfg[key];
      src.file = (fs::path(dir) / "config.json").string();
      if (!src.q.is_object()) throw Error("'" + src.file + "': \"" + key + "\" is not an object");
      src.method = src.q.value("quant_method", std::string());
      if (src.method.empty() && src.q.contains("format")) src.method = "compressed-tensors";
      return true;
    }
  }
  const fs::path hf = fs::path(dir) / "hf_quant_config.json";
  const json h = read_json(hf);
  if (h.is_object() && h.contains("quantization") && h["quantization"].is_object()) {
    src.q = h["quantization"];
    src.file = hf.string();
    src.method = "modelopt";
    return true;
  }
  return false;
}

}  // namespace
}  // namespace castscope::io::detail::quantized

namespace castscope::io::detail {

void fold_quantized(std::vector<Entry>& entries, const std::string& config_dir) {
  using namespace quantized;
  Source src;
  if (config_dir.empty() || !read_source(config_dir, src)) return;
  Parts parts(entries);
  const std::string& m = src.method;
  if (m == "fp8")
    fold_fp8_block(src, parts);
  else if (m == "compressed-tensors" || m == "compressed_tensors")
    fold_ctensors(src, parts);
  else if (m == "mxfp4")
    fold_gptoss(src, parts);
  else if (m == "gptq" || m == "awq")
    fold_gptq_awq(src, parts);
  else if (m == "modelopt")
    fold_modelopt(src, parts);
  else
    throw Error("'" + src.file + "': quantization_config names quant_method '" + m +
                "', which CastScope does not read; its tensors would be taken for raw codes "
                "(docs/io-formats.md lists the conventions it reads)");
  entries = parts.result();
}

}  // namespace castscope::io::detail
