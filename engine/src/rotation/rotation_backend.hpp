// The GPU side of rotate(): built from src/cuda/rotation_cuda.cu in CUDA builds; without CUDA,
// rotation.cpp defines it to report why.
#pragma once

#include "castscope/cast.hpp"
#include "castscope/rotation.hpp"
#include "castscope/tensor.hpp"

namespace castscope::cuda {

// x: float32 viewed as [outer, len, inner], rotated along len in blocks of r.size.
Tensor rotate_f32(const Tensor& x, const Rotation& r, float scale, int64_t outer, int64_t len,
                  int64_t inner, bool inverse);

}  // namespace castscope::cuda

namespace castscope::rotation {

// cast() and upcast() of a rotated cast (options.rotate enabled).
CastResult cast_rotated(const Tensor& x, const DataType& d, const CastOptions& o);
Tensor upcast_rotated(const CastResult& r);

}  // namespace castscope::rotation
