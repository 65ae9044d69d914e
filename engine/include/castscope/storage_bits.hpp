// The exact storage of a cast tensor (engine/src/storage_bits.cpp, read from the family table).
#pragma once

#include <cstdint>
#include <string>

#include "castscope/cast.hpp"

namespace castscope {

// Exact storage of a tensor of `shape` cast to `d` with `o` (its axis resolved for the shape, as
// the cast resolves it), in bits: codes, every scale / zero point / microexponent / mask, and a
// tensor scale once. The figure every size estimate of a plan uses (the plan panel's and
// export's expected size, the planner's budget). Throws Error where the cast's layout does.
uint64_t storage_bits(const DataType& d, const Shape& shape, const CastOptions& o);

// The cost as a person reads it, the nominal figure labelled beside the tensor's own:
// "nominal 4.5, on rows of 9: 128" (bits per value; storage_bits / values, rows of the resolved
// axis). Where the two agree, "4.25". Throws Error where storage_bits does.
std::string bits_label(const DataType& d, const Shape& shape, const CastOptions& o);

}  // namespace castscope
