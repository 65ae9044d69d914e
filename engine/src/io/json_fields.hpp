// Numbers from file headers. nlohmann's get<int64_t>() casts a float or out-of-range number with a
// plain static_cast, which is undefined behaviour for values outside the target type; every
// reader turns header numbers into integers through these checked conversions instead.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "castscope/tensor.hpp"

namespace castscope::io::detail {

// The largest dimension a header may name: far above any real tensor, far below int64 overflow
// when a few are multiplied (checked_numel bounds the product).
inline constexpr int64_t kMaxHeaderDim = int64_t{1} << 46;

// An integer JSON value in [lo, hi]; otherwise Error "'file': field: why" (just "field: why" when
// `file` is empty, for callers that add their own context).
int64_t json_integer(const nlohmann::json& v, const std::string& file, const std::string& field,
                     int64_t lo, int64_t hi);
uint64_t json_unsigned(const nlohmann::json& v, const std::string& file, const std::string& field,
                       uint64_t hi = std::numeric_limits<uint64_t>::max());
// A JSON array of dimensions, each an integer in [0, kMaxHeaderDim], rank at most 64.
Shape json_shape(const nlohmann::json& v, const std::string& file, const std::string& field);

// The same for numbers written as text (metadata values of safetensors are strings): the whole
// text must be a decimal integer in range, or for shapes a JSON array of dimensions.
int64_t text_integer(const std::string& text, const std::string& file, const std::string& field,
                     int64_t lo, int64_t hi);
uint64_t text_unsigned(const std::string& text, const std::string& file, const std::string& field);
Shape text_shape(const std::string& text, const std::string& file, const std::string& field);

}  // namespace castscope::io::detail
