// Introspection of the CUDA cast backend for its tests, declared without CUDA headers so that the
// engine's no-CUDA stub and the GPU tests see the same declaration on machines without the
// toolkit.
#pragma once

#include <cstdint>
#include <string>

#include "castscope/cast.hpp"
#include "castscope/scalar.hpp"

namespace castscope::gpu::detail {

// Whether grid f takes the fast round-to-nearest-even quantizer of the cast kernels.
bool fast_quantizer_applies(const scalar::Format& f);
// The compile-time copy of grid f the cast kernels specialise on (StaticFormat), 0 for none: a
// format fact changed in one place and not the other would silently leave the fast kernels.
int static_grid(const scalar::Format& f);
// The kernel family a device-resident cast of x (uploaded) runs, after one run: "lean", "fast",
// "group", "elementwise", "tcfp", "tcfp-fast" or "tcfp-lean". Throws Error without a GPU.
std::string cast_kernel(const Tensor& x, const DataType& d, const CastOptions& o);

}  // namespace castscope::gpu::detail
