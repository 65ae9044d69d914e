// A datatype's cost on one tensor of a model, as `list --model` and `inspect --dtype` show it:
// storage_bits on the tensor's resolved axis, the one size function plans and exports use.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "castscope/io.hpp"
#include "castscope/storage_bits.hpp"

namespace castscope::cli {

struct TensorBits {
  uint64_t bits = 0;
  double per_value = 0;
  std::string label;  // bits_label: the nominal figure labelled where it differs
  std::string error;  // the datatype cannot lay out along this tensor's axis
};

inline TensorBits tensor_bits(const DataType& d, const io::TensorInfo& t, const CastOptions& o) {
  TensorBits b;
  const int64_t n = numel(t.shape);
  try {
    const CastOptions to = io::cast_options_for(o, t);
    b.bits = storage_bits(d, t.shape, to);
    b.label = bits_label(d, t.shape, to);
    b.per_value = n > 0 ? static_cast<double>(b.bits) / static_cast<double>(n) : 0.0;
  } catch (const Error& e) {
    b.error = e.what();
  }
  return b;
}

// "4.889", "nominal 4.5, on rows of 9: 128" or "error: ..." for a table cell.
inline std::string tensor_bits_text(const TensorBits& b) {
  return b.error.empty() ? b.label : "error: " + b.error;
}

template <class Json>
Json tensor_bits_json(const TensorBits& b) {
  if (!b.error.empty()) return Json{{"error", b.error}};
  return Json{{"storage_bits", b.bits}, {"bits_per_value", b.per_value}, {"label", b.label}};
}

}  // namespace castscope::cli
