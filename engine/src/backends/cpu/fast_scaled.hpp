// Fast path of the CPU engine for float-scaled groups (NVFP4, per-channel / per-tile integers,
// unsigned integers with zero points): float32 input, round to nearest even, no sparsity or
// subtiles. It keeps the generic path's double arithmetic, operation for operation (the scaled
// input x / s, the rounding onto the grid, the value q * s), but as straight-line code over a
// chunk that the compiler vectorizes, with the group's scale chosen once. The rounding adds and
// subtracts 1.5 * 2^(52 + qe), which rounds to the nearest multiple of the quantum 2^qe, ties to
// even, exactly as scalar::quantize does. Groups the path cannot take (NaN / Inf, a zero or NaN
// scale) go to the generic path.
#pragma once

#include <cstdint>

#include "core/group.hpp"

namespace castscope::cpu::fast {

// The data grid and code layout of one cast, derived once from its KernelParams.
struct ScaledParams {
  int kind = 0;   // 0 float, 1 signed integer, 2 unsigned integer
  int mgrid = 0;  // quantum exponent = max(binade - mgrid, qmin)
  int qmin = 0;
  double maxval = 0;  // largest finite magnitude: larger rounded values saturate to it
  bool keep_negzero = false;
  int code_bits = 0;  // bits of a code
  int code_base = 0;  // float codes: ((qe + code_base) << mbits) + r
  int mbits = 0;
  int code_bytes = 0;  // storage bytes per code (1 or 2), 0: codes are written by the caller
};

// Whether the path applies to this cast's data format and options.
bool scaled_ok(const detail::KernelParams& kp);
ScaledParams make_scaled_params(const detail::KernelParams& kp, int code_bytes);

// The per-element arithmetic of one group, as the generic path does it (group.hpp:
// scaled_input and decode_element): op 0 y = x / a, v = q * a; op 1 y = x / (a * b),
// v = q * a * b; op 2 (float zero point) y = (x - b) / a, v = q * a + b; op 3 (integer zero
// point) y = x / a + b, v = (q - b) * a.
struct GroupArith {
  int op = 0;
  double a = 1, b = 0, div = 1;  // div: the divisor op 0 / 1 use, computed once
};

// Arithmetic of group scale g; false where the generic path must take the group.
bool group_arith(const detail::KernelParams& kp, const detail::GroupScale& g, GroupArith& out);

// choose_scale for a batch of groups without zero points whose scale is a float format (NVFP4's
// e4m3fn, float32, bfloat16, ...): raw = (absmax [/ t]) / data_max rounded onto the scale's grid
// (nearest even, saturating) by the same magic add, and its code by the fast code layout.
struct ScaleChoice {
  bool ok = false;
  bool multi = false;
  double data_max = 1;
  int mgrid = 0, qmin = 0;
  double maxval = 0;
  int base = 0, mbits = 0;
};

ScaleChoice make_scale_choice(const detail::KernelParams& kp);
// Groups k < n (n <= 256) with largest magnitudes amax_bits[k] (finite) and tensor scale t: ga[k]
// and the scale codes; returns how many leading groups have a non-zero scale (the rest: generic
// path).
int choose_scales(const ScaleChoice& c, double t, const uint32_t* amax_bits, int n, GroupArith* ga,
                  uint32_t* codes);

// Largest |x| bits, smallest and largest value (both including 0) of n float32 values.
void abs_min_max(const float* x, int64_t n, uint32_t& amax_bits, float& lo, float& hi);

// The same, inline, for short groups where a call would cost more than the loop.
inline void abs_min_max_short(const float* x, int64_t n, uint32_t& amax_bits, float& lo,
                              float& hi) {
  // Smallest and largest through integer keys in the order of the values (a negative value's
  // magnitude bits flipped): a float min / max reduction does not vectorize, an integer one does.
  uint32_t m = 0;
  int32_t l = 0, h = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = scalar::float_bits(x[i]);
    const int32_t k = static_cast<int32_t>(u ^ ((0u - (u >> 31)) & 0x7FFFFFFFu));
    const uint32_t a = u & 0x7FFFFFFFu;
    m = a > m ? a : m;
    l = k < l ? k : l;
    h = k > h ? k : h;
  }
  auto value = [](int32_t k) {
    const uint32_t u = static_cast<uint32_t>(k);
    return scalar::bits_float(u ^ ((0u - (u >> 31)) & 0x7FFFFFFFu));
  };
  amax_bits = m;
  lo = l < -1 ? value(l) : 0.0f;  // key -1 is -0, which counts as 0 (as in -0 < 0)
  hi = value(h);
}

// Casts n finite float32 values of one group. Writes float32 values, or codes (code_bytes per
// code, little-endian) at codes; returns the number of clipped values.
int64_t cast_scaled(const ScaledParams& sp, const GroupArith& ga, const float* x, int n,
                    float* values, void* codes);

// The same for `groups` consecutive groups of len values each, group k with arithmetic ga[k]
// (all of one op): one call for a run of short tiles.
int64_t cast_scaled_groups(const ScaledParams& sp, const GroupArith* ga, int groups, int len,
                           const float* x, float* values, void* codes);

}  // namespace castscope::cpu::fast
