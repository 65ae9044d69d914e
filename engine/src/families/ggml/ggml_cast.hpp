// Casts to ggml's block formats (the GGML datatype family: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k,
// ... q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0, mxfp4_ggml, nvfp4_ggml, q1_0). Blocks run along the last
// axis, as in a GGUF row; the codes of an actual (or compressed, the same bytes) cast are the GGUF
// blocks themselves. CastOptions::importance, when set, is llama.cpp's importance matrix entry for
// the rows. Runs on the CPU for every device, so CPU and CUDA results are the same bits.
#pragma once

#include <optional>

#include "castscope/cast.hpp"

namespace castscope::ggml {

CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& opt);
Tensor upcast(const CastResult& actual);
// A virtual cast along an axis other than the last (the family table's virtual_cast); nullopt
// for a cast along the last axis, which ggml::cast runs.
std::optional<CastResult> cast_virtual_across(const Tensor& x, const DataType& dtype,
                                              const CastOptions& options);

}  // namespace castscope::ggml
