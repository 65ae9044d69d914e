// Applying a block Hadamard rotation (castscope/rotation.hpp) to a tensor.
#pragma once

#include "castscope/cast.hpp"
#include "castscope/rotation.hpp"

namespace castscope {

// R x (or R^-1 x when inverse) along `axis` (negative counts from the end), float32 out, the
// input's shape. The axis length must be a multiple of r.size. The CUDA and CPU paths give the
// same bits; Device::Auto uses the GPU when there is one.
Tensor rotate(const Tensor& x, const Rotation& r, int axis, bool inverse = false,
              Device device = Device::Auto);

}  // namespace castscope
