// Round-to-nearest-even quantization with saturation in float / double arithmetic: the same
// (r, qe, neg, clipped) as scalar::quantize(y, f, Round::Even, Overflow::Saturate, 0) for Float and
// Int grids, without its 64-bit significand arithmetic. The reason this is exact: y * 2^-qe is a
// power-of-two scaling of y (exact, never subnormal for the grids allowed by fast_quant_ok), and
// rint() rounds it to nearest even exactly as the integer remainder test does. The GPU test suite
// checks it against scalar::quantize on every float32 input for every such format.
#pragma once

#include <cuda_fp8.h>

#include "castscope/scalar.hpp"
#include "group.hpp"

namespace castscope::gpu::detail {

// Grids the fast quantizer is exact for: Float / Int kinds whose quantum and largest quantum stay
// far inside float32's normal range (every registry format qualifies).
inline bool fast_quant_ok(const scalar::Format& f) {
  return (f.kind == scalar::Kind::Float || f.kind == scalar::Kind::Int) && f.qmin > -96 &&
         f.maxe < 96 && f.maxbinade < 96 && f.maxr < (1ull << 24);
}

__device__ __forceinline__ float pow2f(int e) {
  return __uint_as_float(static_cast<uint32_t>(e + 127) << 23);
}

__device__ __forceinline__ scalar::Quantized quantize_rne_f32(float y, const scalar::Format& f) {
  scalar::Quantized q;
  const uint32_t u = __float_as_uint(y);
  q.neg = (u >> 31) != 0;
  q.qe = f.qmin;
  const uint32_t a = u & 0x7FFFFFFFu;
  const int e = static_cast<int>(a >> 23);
  if (e == 0) return q;  // zero or a float subnormal: below half of the smallest quantum
  const int b = e - 127;
  const int qe = b - f.mgrid > f.qmin ? b - f.mgrid : f.qmin;
  bool overflow = b > f.maxbinade + 1 || qe > f.maxe;
  uint32_t r = 0;
  if (!overflow) {
    r = static_cast<uint32_t>(rintf(__uint_as_float(a) * pow2f(-qe)));
    overflow = qe == f.maxe && r > f.maxr;
  }
  if (overflow) {
    q.clipped = true;
    q.r = f.maxr;
    q.qe = f.maxe;
    return q;
  }
  q.r = r;
  q.qe = qe;
  return q;
}

__device__ __forceinline__ scalar::Quantized quantize_rne_f64(double y, const scalar::Format& f) {
  scalar::Quantized q;
  const uint64_t u = static_cast<uint64_t>(__double_as_longlong(y));
  q.neg = (u >> 63) != 0;
  q.qe = f.qmin;
  const uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  const int e = static_cast<int>(a >> 52);
  if (e == 0) return q;  // zero or a double subnormal
  const int b = e - 1023;
  if (b < f.qmin - 2) return q;  // below half of the smallest quantum: rounds to zero
  const int qe = b - f.mgrid > f.qmin ? b - f.mgrid : f.qmin;
  bool overflow = b > f.maxbinade + 1 || qe > f.maxe;
  uint64_t r = 0;
  if (!overflow) {
    r = static_cast<uint64_t>(
        rint(__longlong_as_double(static_cast<long long>(a)) * scalar::pow2(-qe)));
    overflow = qe == f.maxe && r > f.maxr;
  }
  if (overflow) {
    q.clipped = true;
    q.r = f.maxr;
    q.qe = f.maxe;
    return q;
  }
  q.r = r;
  q.qe = qe;
  return q;
}

// quantize_rne_f64 of RN(x / d), given inv = RN(1 / d), without a division per element: x * inv is
// within a few ulps of x / d, and round-to-nearest-even of two values that close differs only when
// a rounding midpoint (k + 1/2) * 2^qe lies between them, so only inputs near a midpoint pay for
// the exact quotient.
__device__ __forceinline__ scalar::Quantized quantize_rne_div(double x, double d, double inv,
                                                              const scalar::Format& f) {
  const double y = x * inv;
  const double a = fabs(y);
  const int b = static_cast<int>((static_cast<uint64_t>(__double_as_longlong(a)) >> 52)) - 1023;
  const int qe = b - f.mgrid > f.qmin ? b - f.mgrid : f.qmin;
  const double t = a * scalar::pow2(-qe);
  const double frac = t - floor(t);
  if (fabs(frac - 0.5) < 0x1p-20) return quantize_rne_f64(x / d, f);
  return quantize_rne_f64(y, f);
}

// Whether y lies within `tol` (relative to the quantum) of a rounding midpoint of grid f.
__device__ __forceinline__ bool near_midpoint(double y, const scalar::Format& f, double tol) {
  const double a = fabs(y);
  const int b = static_cast<int>((static_cast<uint64_t>(__double_as_longlong(a)) >> 52)) - 1023;
  const int qe = b - f.mgrid > f.qmin ? b - f.mgrid : f.qmin;
  const double t = a * scalar::pow2(-qe);
  return fabs(t - floor(t) - 0.5) < tol;
}

// Compile-time copies of the hottest data grids (values as NumberSpec builds them; the host picks
// one only when the plan's grid equals it field for field), so the shared encode / canonical fold
// to a handful of instructions.
enum StaticFormat { kRuntime = 0, kE4M3FN = 1, kE2M1FNUZ = 2, kInt8Fixed = 3 };

__host__ __device__ constexpr scalar::Format static_format(int id) {
  return id == kE4M3FN     ? scalar::Format{scalar::Kind::Float,
                                        scalar::InfNan::FN,
                                        8,
                                        4,
                                        3,
                                        7,
                                        8,
                                        -6,
                                        3,
                                        -9,
                                        14ull,
                                        5,
                                        8,
                                        false,
                                        true,
                                        true,
                                        true}
         : id == kE2M1FNUZ ? scalar::Format{scalar::Kind::Float,
                                            scalar::InfNan::FNUZ,
                                            4,
                                            2,
                                            1,
                                            1,
                                            2,
                                            0,
                                            1,
                                            -1,
                                            3ull,
                                            1,
                                            2,
                                            false,
                                            true,
                                            false,
                                            true}
                           : scalar::Format{scalar::Kind::Int,
                                            scalar::InfNan::IEEE,
                                            8,
                                            1,
                                            6,
                                            0,
                                            0,
                                            -6,
                                            62,
                                            -6,
                                            127ull,
                                            -6,
                                            0,
                                            false,
                                            false,
                                            false,
                                            true};
}

// Codes of a finite y for the two hottest grids, round to nearest even with saturation, as the
// hardware conversion (e4m3fn) and a threshold ladder over the rounding midpoints (e2m1 "fnuz",
// whose -0 code means NaN, so a zero result carries no sign). Both are checked against the shared
// quantizer on every float32 input.
__device__ __forceinline__ uint32_t code_e4m3fn(float y, bool& clipped) {
  clipped = fabsf(y) > 464.0f;  // the midpoint between 448 and 480 rounds to even, down to 448
  return __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ uint32_t code_e2m1fnuz(float y, bool& clipped) {
  const float a = fabsf(y);
  const uint32_t m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                     (a >= 3.5f) + (a > 5.0f);
  clipped =
      a >= 7.0f;  // 7 is the midpoint between 6 and the next binade's 8: rounds up, so saturates
  return m ? m | ((__float_as_uint(y) >> 28) & 0x8u) : 0u;
}

// int8 as MX defines it (q / 64, saturating at +-127, no -128).
__device__ __forceinline__ uint32_t code_int8q6(float y, bool& clipped) {
  const float t = y * 64.0f;
  const float a = fabsf(t);
  clipped = a >= 127.5f;  // 127.5 rounds to even 128, beyond the grid
  const uint32_t r = static_cast<uint32_t>(fminf(rintf(a), 127.0f));
  return (__float_as_uint(t) >> 31) ? (0u - r) & 0xFFu : r;
}

// e2m1 "fnuz" code of RN(x / d) without a division: y = x * RN(1 / d) in float is within 2^-22 of
// x / d, so the ladder decides exactly unless y lies within 2^-20 of one of its midpoints; those
// inputs take the exact double quotient.
__device__ __forceinline__ uint32_t code_e2m1fnuz_div(float x, double d, float inv_f,
                                                      const scalar::Format& f, bool& clipped) {
  const float y = x * inv_f;
  const float a = fabsf(y);
  const float mids[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f};
  bool near = false;
#pragma unroll
  for (int i = 0; i < 8; ++i) near |= fabsf(a - mids[i]) <= mids[i] * 0x1p-20f;
  if (!near) return code_e2m1fnuz(y, clipped);
  const scalar::Quantized q =
      castscope::detail::canonical(quantize_rne_f64(static_cast<double>(x) / d, f), f);
  clipped = q.clipped;
  return scalar::encode(q, f);
}

inline int static_format_id(const scalar::Format& f) {
  for (int id : {kE4M3FN, kE2M1FNUZ, kInt8Fixed}) {
    const scalar::Format s = static_format(id);
    if (s.kind == f.kind && s.infnan == f.infnan && s.bits == f.bits && s.ebits == f.ebits &&
        s.mbits == f.mbits && s.bias == f.bias && s.emax == f.emax && s.emin == f.emin &&
        s.mgrid == f.mgrid && s.qmin == f.qmin && s.maxr == f.maxr && s.maxe == f.maxe &&
        s.maxbinade == f.maxbinade && s.has_inf == f.has_inf && s.has_nan == f.has_nan &&
        s.has_negzero == f.has_negzero && s.is_signed == f.is_signed)
      return id;
  }
  return kRuntime;
}

}  // namespace castscope::gpu::detail
