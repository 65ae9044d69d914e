// Round-to-nearest-even quantization with saturation in float / double arithmetic: the same
// (r, qe, neg, clipped) as scalar::quantize(y, f, Round::Even, Overflow::Saturate, 0) for Float and
// Int grids, without its 64-bit significand arithmetic. The reason this is exact: y * 2^-qe is a
// power-of-two scaling of y (exact, never subnormal for the grids allowed by fast_quant_ok), and
// rint() rounds it to nearest even exactly as the integer remainder test does. The GPU test suite
// checks it against scalar::quantize on every float32 input for every such format.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "castscope/scalar.hpp"
#include "core/group.hpp"

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

// What both widths do once |y|'s binade b is known: its quantum 2^qe, the magnitude
// rounded(qe) = RN(|y| / 2^qe) as an integer of type R, saturated at the grid's largest value.
template <typename R, typename Rounded>
__device__ __forceinline__ scalar::Quantized round_in_binade(scalar::Quantized q, int b,
                                                             const scalar::Format& f,
                                                             Rounded rounded) {
  const int qe = b - f.mgrid > f.qmin ? b - f.mgrid : f.qmin;
  bool overflow = b > f.maxbinade + 1 || qe > f.maxe;
  R r = 0;
  if (!overflow) {
    r = rounded(qe);
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

__device__ __forceinline__ scalar::Quantized quantize_rne_f32(float y, const scalar::Format& f) {
  scalar::Quantized q;
  const uint32_t u = __float_as_uint(y);
  q.neg = (u >> 31) != 0;
  q.qe = f.qmin;
  const uint32_t a = u & 0x7FFFFFFFu;
  const int e = static_cast<int>(a >> 23);
  if (e == 0) return q;  // zero or a float subnormal: below half of the smallest quantum
  return round_in_binade<uint32_t>(q, e - 127, f, [&](int qe) {
    return static_cast<uint32_t>(rintf(__uint_as_float(a) * pow2f(-qe)));
  });
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
  return round_in_binade<uint64_t>(q, b, f, [&](int qe) {
    return static_cast<uint64_t>(
        rint(__longlong_as_double(static_cast<long long>(a)) * scalar::pow2(-qe)));
  });
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

// Compile-time copies of the hottest data grids, built by the same rules as NumberSpec (the host
// picks one only when the plan's grid equals it field for field), so the shared encode / canonical
// fold to a handful of instructions.
enum StaticFormat {
  kRuntime = 0,
  kE4M3FN = 1,
  kE2M1FNUZ = 2,
  kInt8Fixed = 3,
  kE5M2 = 4,
  // MXFP6's grids, TensorCast's e2m3fnuz / e3m2fnuz: up to 6 bits these are the OCP formats
  // (finite, with -0; docs/formats.md), so the copies must say Finite or no plan matches them.
  kE2M3FNUZ = 5,
  kE3M2FNUZ = 6,
  kBF16 = 7,  // outside fast_quant_ok (its quantum reaches float's subnormals): code_bf16 only
};

__host__ __device__ constexpr scalar::Format static_format(int id) {
  using scalar::InfNan;
  return id == kE4M3FN     ? scalar::float_format(4, 3, 7, InfNan::FN)
         : id == kE5M2     ? scalar::float_format(5, 2, 15, InfNan::IEEE)
         : id == kE2M3FNUZ ? scalar::float_format(2, 3, 1, InfNan::FNUZ)
         : id == kE3M2FNUZ ? scalar::float_format(3, 2, 3, InfNan::FNUZ)
         : id == kBF16     ? scalar::float_format(8, 7, 127, InfNan::IEEE)
         : id == kE2M1FNUZ ? scalar::float_format(2, 1, 1, InfNan::FNUZ)
                           : scalar::int_format(8, true);
}
static_assert(static_format(kE4M3FN).maxr == 14 && static_format(kE4M3FN).maxe == 5);
static_assert(static_format(kE2M1FNUZ).infnan == scalar::InfNan::Finite);

// Where the code functions below start to clip, from the grid's largest magnitude maxr * 2^maxe:
// the midpoint (2 maxr + 1) * 2^(maxe - 1) to the next value the grid would have rounds to the
// even one of the two, so |y| clips above it when maxr is even (e4m3fn: 464, rounding down to
// 448) and from it on when maxr is odd (e5m2: 61440, e2m1: 7). These midpoints have at most 8
// significant bits: bfloat16 values too (the lean kernel compares raw bfloat16 bits).
struct ClipAt {
  float at;
  bool strict;
};
constexpr float pow2_const(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}
template <int F>
constexpr ClipAt clip_static() {
  constexpr scalar::Format f = static_format(F);
  return {static_cast<float>(2 * f.maxr + 1) * pow2_const(f.maxe - 1), f.maxr % 2 == 0};
}
__device__ __forceinline__ bool clips(float y, ClipAt c) {
  return c.strict ? fabsf(y) > c.at : fabsf(y) >= c.at;
}

// Codes of a finite y for the two hottest grids, round to nearest even with saturation, as the
// hardware conversion (e4m3fn) and a threshold ladder over the rounding midpoints (e2m1, whose
// 0x8 is -0: a zero result keeps the input's sign, spec decision 9). Both are checked against the
// shared quantizer on every float32 input.
__device__ __forceinline__ uint32_t code_e4m3fn(float y, bool& clipped) {
  clipped = clips(y, clip_static<kE4M3FN>());
  return __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ uint32_t code_e5m2(float y, bool& clipped) {
  clipped = clips(y, clip_static<kE5M2>());
  return __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E5M2);
}
// bfloat16 code of a finite y: bfloat16 is float32's top half, so round to nearest even is one
// integer add on the bits, subnormals and -0 included. A result past the largest finite value
// is Inf, or under saturation that value, counted as clipped.
__device__ __forceinline__ uint32_t code_bf16(float y, bool saturate, bool& clipped) {
  const uint32_t u = __float_as_uint(y);
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  clipped = saturate && (r & 0x7FFFu) == 0x7F80u;
  return clipped ? (r & 0x8000u) | 0x7F7Fu : r;
}

// Codes of a finite y on a small OCP float grid with EBITS exponent and M mantissa bits, smallest
// normal binade EMIN and top binade EMAX (no Inf or NaN, -0 kept), round to nearest even with
// saturation. The subnormals and binade EMIN share a quantum; each binade above doubles it. In the
// range r of that (r = binade - EMIN, 0 for subnormals) the magnitude code is
// RN(a / quantum_r) + r * 2^M, done by adding 1.5 * 2^23 (exact scaling, one rounding to an
// integer, ties to the even integer, which is the even code). The top mantissa is odd, so the
// midpoint to the next power of two rounds up and saturates.
template <int EBITS, int M, int EMIN, int EMAX>
__device__ __forceinline__ uint32_t code_small_ocp(float y, bool& clipped, ClipAt clip) {
  constexpr uint32_t kMaxCode = (static_cast<uint32_t>(EMAX - EMIN + 1) << M) | ((1u << M) - 1);
  constexpr int kRanges = EMAX - EMIN + 1;
  constexpr float kMagic = 0x1.8p23f;
  const float a = fabsf(y);
  uint32_t m;
  if constexpr (kRanges <= 3) {
    // Every range's expression, a line of slope 1 / quantum_r, is the least of them all inside
    // its own range (consecutive lines cross at the binade boundary; RN is monotone), so the code
    // is the least of them and kMaxCode: three fused adds and three minima where the branch
    // below spends about ten integer operations on the binade (the bfloat16 casts are
    // instruction-bound). A sum past 2^22 rounds coarser but stays above kMaxCode.
    float c = kMagic + static_cast<float>(kMaxCode);
#pragma unroll
    for (int r = 0; r < kRanges; ++r)
      c = fminf(c, fmaf(a, pow2f(M - EMIN - r), kMagic + static_cast<float>(r << M)));
    m = __float_as_uint(c) & ((1u << (EBITS + M)) - 1u);
  } else {
    const float ac = fminf(a, pow2f(EMAX + 1));
    const int q = max(static_cast<int>(__float_as_uint(ac) >> 23) - 127 - EMIN, 0);
    const int k =
        static_cast<int>(__float_as_uint(fmaf(ac, pow2f(M - EMIN - q), kMagic)) - 0x4B400000u);
    m = min(static_cast<uint32_t>(k) + (static_cast<uint32_t>(q) << M), kMaxCode);
  }
  clipped = clips(a, clip);
  return m | ((__float_as_uint(y) >> 31) << (EBITS + M));
}
// e2m1's 0x8 is -0: a zero result keeps the input's sign (spec decision 9).
__device__ __forceinline__ uint32_t code_e2m1fnuz(float y, bool& clipped) {
  return code_small_ocp<2, 1, 0, 2>(y, clipped, clip_static<kE2M1FNUZ>());
}
__device__ __forceinline__ uint32_t code_e2m3(float y, bool& clipped) {
  return code_small_ocp<2, 3, 0, 2>(y, clipped, clip_static<kE2M3FNUZ>());
}
__device__ __forceinline__ uint32_t code_e3m2(float y, bool& clipped) {
  return code_small_ocp<3, 2, -2, 4>(y, clipped, clip_static<kE3M2FNUZ>());
}

// e2m1 code of RN(x / d) by comparing x with the rounding midpoints times d, thresholds
// rounded toward x's side: for a float x and a real T, x > T exactly when x > RD(T), and x >= T
// exactly when x >= RU(T). The double quotient the shared path rounds cannot cross or land on a
// midpoint that the exact quotient does not (x has 24 significant bits, d = s * t at most 28,
// so x / d is either a midpoint or 2^-32 away from one, relatively), so this is exact.
struct E2m1Thresholds {
  float t[8];  // > 0.25, >= 0.75, > 1.25, >= 1.75, > 2.5, >= 3.5, > 5, >= 7 (clip), times d
};
// d = s * t with s an e4m3 value and t a float: mid * s is exact in float, one directed rounding
// of the product with t.
__device__ __forceinline__ E2m1Thresholds e2m1_thresholds(float s, float t) {
  E2m1Thresholds h;
  h.t[0] = __fmul_rd(0.25f * s, t);
  h.t[1] = __fmul_ru(0.75f * s, t);
  h.t[2] = __fmul_rd(1.25f * s, t);
  h.t[3] = __fmul_ru(1.75f * s, t);
  h.t[4] = __fmul_rd(2.5f * s, t);
  h.t[5] = __fmul_ru(3.5f * s, t);
  h.t[6] = __fmul_rd(5.0f * s, t);
  h.t[7] = __fmul_ru(7.0f * s, t);
  return h;
}
// Code of a finite x in a group whose scale is zero (NVFP4 tile below the e4m3 range): -0 for
// negative x, as encode_element keeps the sign; a NaN group's codes are 0.
__device__ __forceinline__ uint32_t code_e2m1_zero_scale(float x, bool nan_group) {
  return nan_group ? 0u : ((__float_as_uint(x) >> 28) & 0x8u);
}
__device__ __forceinline__ uint32_t code_e2m1fnuz_thr(float x, const E2m1Thresholds& h,
                                                      bool& clipped) {
  const float a = fabsf(x);
  const uint32_t m = (a > h.t[0]) + (a >= h.t[1]) + (a > h.t[2]) + (a >= h.t[3]) + (a > h.t[4]) +
                     (a >= h.t[5]) + (a > h.t[6]);
  clipped = a >= h.t[7];
  return m | ((__float_as_uint(x) >> 28) & 0x8u);
}

// The binade of a positive finite float and its 24-bit significand (leading one at bit 23).
__device__ __forceinline__ int binade_f32(float a, uint32_t& m) {
  const uint32_t u = __float_as_uint(a) & 0x7FFFFFFFu;
  const int ex = static_cast<int>(u >> 23);
  if (ex == 0) {  // float subnormal: a normal double, renormalized here
    const int lz = __clz(u) - 8;
    m = u << lz;
    return -126 - lz;
  }
  m = (u & 0x7FFFFFu) | 0x800000u;
  return ex - 127;
}

// Whether select_exponent_f32 is the binade alone: the floor mode, or a grid the modes do not move.
__device__ __forceinline__ bool binade_only(const scalar::Format& f, scalar::ScaleMode mode) {
  return f.kind != scalar::Kind::Float || f.ebits <= 1 || mode == scalar::ScaleMode::Floor;
}
// scalar::select_exponent of a positive finite float a (a double on the host) from the float's
// bits: the binade, and the significand for the rounding modes.
__device__ __forceinline__ int select_exponent_f32(float a, const scalar::Format& f,
                                                   scalar::ScaleMode mode) {
  uint32_t m;
  const int binade = binade_f32(a, m);
  if (binade_only(f, mode)) return binade;
  switch (mode) {
    case scalar::ScaleMode::Ceil:
      return binade + ((m & 0x7FFFFFu) ? 1 : 0);
    case scalar::ScaleMode::Midmax:
      return binade + (static_cast<double>(m) * 0x1p-23 > scalar::midmax_scaled(f) ? 1 : 0);
    case scalar::ScaleMode::Option3: {
      // The low 29 bits of the double's significand are zero: rounding to mbits >= 23 is exact.
      if (f.mbits >= 23) return binade;
      const int sh = 23 - f.mbits;
      uint32_t r = m >> sh;
      const uint32_t rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
      if (rem > half || (rem == half && (r & 1))) ++r;
      return binade + ((r >> (f.mbits + 1)) ? 1 : 0);
    }
    case scalar::ScaleMode::TopBinade: {
      const double mx = scalar::ldexp_int(f.maxr, f.maxe - f.emax);
      return binade + (static_cast<double>(m) * 0x1p-23 > mx ? 1 : 0);
    }
    default:
      return binade;
  }
}

// The exponent scale code of a tile whose absmax selects exponent e, clamped to the scale's codes.
__device__ __forceinline__ int exp_scale_code(const castscope::detail::KernelParams& kp, int e) {
  const int code = e - kp.data.emax + kp.scale.bias, maxcode = (1 << kp.scale.bits) - 2;
  return code < 0 ? 0 : (code > maxcode ? maxcode : code);
}

// choose_scale for an exponent scale without tensor scale, from the float absmax of a tile.
__device__ __forceinline__ castscope::detail::GroupScale choose_exp_scale_f32(
    const castscope::detail::KernelParams& kp, float absmax, bool nonfinite) {
  castscope::detail::GroupScale g;
  if (nonfinite) {
    g.nan = true;
    g.scale_code = kp.scale.kind == scalar::Kind::Exponent ? (1u << kp.scale.bits) - 1
                                                           : scalar::nan_code(kp.scale);
    return g;
  }
  int code = 0;
  if (absmax > 0.0f) code = exp_scale_code(kp, select_exponent_f32(absmax, kp.data, kp.scale_mode));
  g.scale_code = static_cast<uint32_t>(code);
  g.shift = code - kp.scale.bias;
  g.s = scalar::pow2(g.shift);
  return g;
}

// int8 as MX defines it (q / 64, saturating at +-127, no -128).
__device__ __forceinline__ uint32_t code_int8q6(float y, bool& clipped) {
  const float t = y * 64.0f;
  const float a = fabsf(t);
  clipped = clips(y, clip_static<kInt8Fixed>());
  const uint32_t r = static_cast<uint32_t>(fminf(rintf(a), 127.0f));
  return (__float_as_uint(t) >> 31) ? (0u - r) & 0xFFu : r;
}

// The compile-time grids with a code function above.
constexpr bool has_code_static(int F) {
  return F == kE4M3FN || F == kE5M2 || F == kE2M1FNUZ || F == kE2M3FNUZ || F == kE3M2FNUZ ||
         F == kInt8Fixed;
}
// Codes of a finite y on such a grid F, round to nearest even with saturation.
template <int F>
__device__ __forceinline__ uint32_t code_static(float y, bool& clipped) {
  static_assert(has_code_static(F), "no code function for this grid");
  if constexpr (F == kE4M3FN) return code_e4m3fn(y, clipped);
  if constexpr (F == kE5M2) return code_e5m2(y, clipped);
  if constexpr (F == kE2M1FNUZ) return code_e2m1fnuz(y, clipped);
  if constexpr (F == kE2M3FNUZ) return code_e2m3(y, clipped);
  if constexpr (F == kE3M2FNUZ) return code_e3m2(y, clipped);
  if constexpr (F == kInt8Fixed) return code_int8q6(y, clipped);
  return 0;
}

// e2m1 code of RN(x / d) without a division: y = x * RN(1 / d) in float is within 2^-22 of
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

// The value of an e4m3fn code, by the hardware conversion (through half, which holds it exactly).
__device__ __forceinline__ float e4m3_value(uint32_t code) {
  return __half2float(
      __half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

// choose_scale of an e4m3 scale without zero point (NVFP4's) from the float absmax: raw = absmax *
// RN(1 / (t * data_max)) in float is within 2^-22 (relative) of the shared double expression, so
// the hardware e4m3 conversion of it rounds alike unless raw lies within 2^-16 of a quantum from a
// rounding midpoint of the e4m3 grid; those tiles, NaN groups and a NaN tensor scale take the
// shared double path (exact()).
template <class Exact>
__device__ __forceinline__ castscope::detail::GroupScale choose_e4m3_scale_f32(
    const castscope::detail::KernelParams& kp, float absmax, bool nonfinite, float inv_f,
    Exact&& exact) {
  if (nonfinite) return exact();
  const float raw = absmax * inv_f;
  uint32_t code = 0x7Eu;  // far above 448: saturates
  if (raw < 0x1p100f) {
    const int b = static_cast<int>(__float_as_uint(raw) >> 23) - 127;
    const int qe = b - 3 > -9 ? b - 3 : -9;
    const float t = raw * pow2f(-qe);
    if (fabsf(t - floorf(t) - 0.5f) < 0x1p-16f) return exact();
    code = __nv_cvt_float_to_fp8(raw, __NV_SATFINITE, __NV_E4M3);
  }
  castscope::detail::GroupScale g;
  g.t = kp.tensor_scale;
  g.scale_code = code;
  g.s = static_cast<double>(e4m3_value(code));
  return g;
}

inline int static_format_id(const scalar::Format& f) {
  for (int id : {kE4M3FN, kE2M1FNUZ, kInt8Fixed, kE5M2, kE2M3FNUZ, kE3M2FNUZ, kBF16}) {
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

// choose_scale for a float (not exponent) scale without zero point, rounding the raw scale with the
// fast quantizer. raw = absmax * RN(1 / (t * data_max)) is within a few ulps of the shared
// RN(RN(absmax / t) / data_max); both round alike unless a midpoint of the scale grid lies
// between them, so inputs within 2^-40 of one take the shared expression.
__device__ __forceinline__ castscope::detail::GroupScale choose_float_scale_fast(
    const castscope::detail::KernelParams& kp, double absmax, bool nonfinite, double inv_td) {
  castscope::detail::GroupScale g;
  g.t = kp.multiscale ? kp.tensor_scale : 1.0;
  if (nonfinite || (kp.multiscale && !(g.t == g.t))) {
    g.nan = true;
    g.scale_code = scalar::nan_code(kp.scale);
    return g;
  }
  double raw = absmax * inv_td;
  if (near_midpoint(raw, kp.scale, 0x1p-40))
    raw = (kp.multiscale ? absmax / g.t : absmax) / kp.data_max;
  const scalar::Quantized q = quantize_rne_f64(raw, kp.scale);
  g.scale_code = scalar::encode(q, kp.scale);
  g.s = scalar::ldexp_int(q.r, q.qe);  // the code's value: a non-negative r * 2^qe
  return g;
}

}  // namespace castscope::gpu::detail
