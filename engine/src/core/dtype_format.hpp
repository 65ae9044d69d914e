// The number format each storage dtype holds natively, from tensor.cpp's one table of DType facts:
// float32, float16, bfloat16 and the two FP8 dtypes store the codes of the unscaled datatype of
// that name, so a cast to it gives the storage bits and an upcast gives the values back.
#pragma once

#include <optional>
#include <string>

#include "castscope/tensor.hpp"

namespace castscope {

// "float32", "float16", "bfloat16", "e4m3fn", "e5m2"; null for float64 and the integers.
const char* dtype_format(DType d);
// The dtype whose native format is `format`, if any.
std::optional<DType> dtype_of_format(const std::string& format);

}  // namespace castscope
