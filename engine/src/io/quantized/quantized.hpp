// The quantized-source layer of the checkpoint readers: a checkpoint whose config.json has a
// `quantization_config` (or a ModelOpt hf_quant_config.json) stores its weights as codes plus
// companion tensors. One module per convention folds them into one logical weight under the
// unquantized weight's name, whose load() gives the producer's own dequantized values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/reader.hpp"

namespace castscope::io::detail::quantized {

using nlohmann::json;

// What the checkpoint says about its quantization.
struct Source {
  json q;            // quantization_config, or hf_quant_config.json's "quantization"
  std::string file;  // the file that said it (errors name it)
  std::string method;
};

// The entries being folded, by name: conventions look companions up, take them, and put a
// logical weight in place of the codes.
class Parts {
 public:
  explicit Parts(std::vector<Entry>& entries);
  size_t size() const { return entries_.size(); }
  const Entry& at(size_t i) const { return entries_[i]; }
  const Entry* find(const std::string& name) const;
  // The companion `name` of weight `weight`; a missing one is an error naming both.
  const Entry& need(const std::string& name, const std::string& weight, const Source& src) const;
  // Replaces entry `codes` by `logical` and drops the companions named in logical.info.stored.
  void fold(size_t codes, Entry logical);
  // Drops a companion that belongs to no weight's values (activation scales).
  void drop(const std::string& name);
  bool taken(size_t i) const { return state_[i] != 0; }
  std::vector<Entry> result();

 private:
  std::vector<Entry>& entries_;
  std::vector<int> state_;  // 0 kept, 1 replaced, 2 dropped
  std::map<size_t, Entry> logical_;
  std::map<std::string, size_t> index_;
};

inline bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// "'file': tensor 'name': " for entry e.
std::string where_entry(const Entry& e);
// Throws unless e's stored dtype is one of `dtypes` (safetensors names).
void expect_dtype(const Entry& e, std::initializer_list<const char*> dtypes, const char* role);
// Throws unless e's shape is `want`.
void expect_shape(const Entry& e, const Shape& want, const char* role);
// The stored tensor (borrowed from the map when aligned).
Tensor raw(const Entry& e);

// A logical weight named `name` of `shape` made of `parts` (codes first), dequantized by `load`
// into values of `dequant_dtype` ("F32", "BF16", "F16") that it returns as float32.
Entry logical_weight(const std::string& name, const Shape& shape, const std::string& dequant_dtype,
                     const std::vector<const Entry*>& parts, const std::string& convention,
                     const std::string& datatype, const std::string& format,
                     std::function<Tensor()> load);
// `spec` if CastScope's datatype grammar reads it (its printed form), else "".
std::string datatype_if_known(const std::string& spec);
// CastScope's name of a float scale dtype: "F32" -> "float32", "BF16" -> "bfloat16", ...
std::string scale_spec(const std::string& safetensors_dtype);

// Rounding of a float32 value to the producer's dequantization dtype, as PyTorch's CPU ops round.
float round_to(float v, const std::string& dtype);
// A float scale element (F32 / BF16 / F16 / F8_E4M3) as float32, exactly.
float scale_at(const Tensor& t, int64_t i);
// An E8M0 exponent byte as float32 2^(e-127); 255 is +inf (what 2.0 ** (e - 127) gives).
float e8m0(uint8_t e);
// The FP4 (E2M1) value of a nibble.
float e2m1(unsigned nibble);

// The conventions; each folds what it recognises in `parts` and throws for what does not fit.
void fold_fp8_block(const Source& src, Parts& parts);
void fold_ctensors(const Source& src, Parts& parts);
void fold_gptoss(const Source& src, Parts& parts);
void fold_gptq_awq(const Source& src, Parts& parts);
void fold_modelopt(const Source& src, Parts& parts);

}  // namespace castscope::io::detail::quantized

namespace castscope::io::detail {
// Folds a quantized checkpoint's companions into logical weights, from config.json /
// hf_quant_config.json in `config_dir`; entries of an unquantized checkpoint stay as they are.
void fold_quantized(std::vector<Entry>& entries, const std::string& config_dir);
}  // namespace castscope::io::detail
