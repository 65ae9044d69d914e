// The block Hadamard transform as CS_HD code, so that the CPU and CUDA backends run the same
// operations in the same order and give identical bits. Every step is an IEEE single-precision
// add, subtract, multiply or sign flip written with explicit round-to-nearest intrinsics on the
// device, so no compiler can fuse or reorder them.
#pragma once

#include <cstdint>

#include "castscope/scalar.hpp"

namespace castscope::rotation {

constexpr int kMaxBlock = 256;

using scalar::add_rn;
using scalar::mul_rn;
using scalar::sub_rn;

// Sign of position `pos` along the rotated axis: one draw per position, so the same D acts on
// every row and a weight and its activations can share it.
CS_HD bool negative_sign(uint64_t seed, int64_t pos) {
  return (scalar::random_bits(seed ^ 0x5EEDB10CC0DEull, static_cast<uint64_t>(pos)) & 1u) != 0;
}

// Unnormalized fast Walsh-Hadamard transform (Sylvester order) of v[0..n).
CS_HD void fwht(float* v, int n) {
  for (int h = 1; h < n; h <<= 1)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = add_rn(a, b);
        v[j + h] = sub_rn(a, b);
      }
}

// One block of n values, the first at position pos0 along the axis. Forward: signs, transform,
// scale. Inverse: transform, scale, signs (the transpose of the forward map).
CS_HD void rotate_block(float* v, int n, float scale, bool signs, uint64_t seed, int64_t pos0,
                        bool inverse) {
  if (signs && !inverse)
    for (int j = 0; j < n; ++j)
      if (negative_sign(seed, pos0 + j)) v[j] = -v[j];
  fwht(v, n);
  for (int j = 0; j < n; ++j) v[j] = mul_rn(v[j], scale);
  if (signs && inverse)
    for (int j = 0; j < n; ++j)
      if (negative_sign(seed, pos0 + j)) v[j] = -v[j];
  // A NaN (or Inf - Inf) spreads over its block; its payload and sign differ between x86 and
  // CUDA, so every NaN leaves as the one quiet NaN.
  for (int j = 0; j < n; ++j)
    if (v[j] != v[j]) v[j] = scalar::bits_float(0x7FC00000u);
}

}  // namespace castscope::rotation
