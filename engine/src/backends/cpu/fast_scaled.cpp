// The float-scale fast path's loops, compiled for AVX2 and baseline x86-64 and picked at load
// time (as fast_tile.cpp). Floating-point contraction is off for this file (engine/CMakeLists.txt):
// a fused q * a + b would round once where the generic path rounds twice.

#include "backends/cpu/fast_scaled.hpp"
#include "backends/cpu/fast_tile.hpp"

namespace castscope::cpu::fast {
namespace {

using scalar::bits_double;
using scalar::double_bits;

template <int Kind, int Op, int Out>
inline __attribute__((always_inline)) int64_t scaled_loop(const ScaledParams& sp,
                                                          const GroupArith& ga, const float* x,
                                                          int n, float* values, void* codes) {
  int64_t clipped = 0;
  uint8_t* c8 = static_cast<uint8_t*>(codes);
  uint16_t* c16 = static_cast<uint16_t*>(codes);
  // Locals, not reads through sp / ga: byte stores may alias those, which stops vectorization.
  const double maxval = sp.maxval, ga_a = ga.a, ga_b = ga.b, ga_div = ga.div;
  const int64_t qmin = sp.qmin, mgrid = sp.mgrid;
  const uint64_t keep_negzero = sp.keep_negzero;
  const int32_t code_base = sp.code_base, mbits = sp.mbits, sign_bit = sp.code_bits - 1;
  for (int i = 0; i < n; ++i) {
    const double xd = static_cast<double>(x[i]);
    double y;
    if constexpr (Op == 0 || Op == 1)
      y = xd / ga_div;
    else if constexpr (Op == 2)
      y = (xd - ga_b) / ga_a;
    else
      y = xd / ga_a + ga_b;
    const uint64_t yb = double_bits(y);
    const uint64_t sign = yb >> 63;
    const double a = bits_double(yb & 0x7FFFFFFFFFFFFFFFull);
    int64_t qe = qmin;
    if constexpr (Kind == 0) {
      const int64_t b = static_cast<int64_t>(yb >> 52 & 0x7FF) - 1023;
      qe = b - mgrid > qe ? b - mgrid : qe;
    }
    // a + 1.5 * 2^(52 + qe) lies in [2^(52 + qe), 2^(53 + qe)), where the spacing of doubles is
    // 2^qe: the add rounds a to the grid (nearest, ties to even) and the subtract is exact.
    const double magic = bits_double(static_cast<uint64_t>(qe + 52 + 1023) << 52 | 1ull << 51);
    const double rv = (a + magic) - magic;
    const uint64_t over = rv > maxval;
    double m = over ? maxval : rv;
    uint64_t neg;
    if constexpr (Kind == 2) {
      // Below an unsigned grid: 0, clipped where the magnitude did not round to 0 itself.
      clipped += (sign & static_cast<uint64_t>(rv != 0)) | ((sign ^ 1) & over);
      m = bits_double(double_bits(m) & (sign - 1));
      neg = 0;
    } else {
      clipped += over;
      neg = sign & (static_cast<uint64_t>(m != 0) | keep_negzero);
    }
    if constexpr (Out == 0) {
      const double qv = bits_double(double_bits(m) | neg << 63);
      double v;
      if constexpr (Op == 0)
        v = qv * ga_a;
      else if constexpr (Op == 1)
        v = qv * ga_a * ga_b;
      else if constexpr (Op == 2)
        v = qv * ga_a + ga_b;
      else
        v = (qv - ga_b) * ga_a;
      values[i] = static_cast<float>(v);
    } else {
      int32_t code;
      if constexpr (Kind == 0) {
        // Quantum of the rounded magnitude, then the code ((qe + base) << mbits) + r, which is
        // the subnormal code r at qe = qmin and carries into the exponent field above it.
        const int64_t e = static_cast<int64_t>(double_bits(m) >> 52) - 1023;
        const int64_t q2 = e - mgrid > qmin ? e - mgrid : qmin;
        const int32_t r =
            static_cast<int32_t>(m * bits_double(static_cast<uint64_t>(1023 - q2) << 52));
        code = ((static_cast<int32_t>(q2) + code_base) << mbits) + r;
        code |= static_cast<int32_t>(neg) << sign_bit;
      } else {
        const int32_t ng = -static_cast<int32_t>(neg);  // two's complement negation as (r ^ -1) + 1
        code = (static_cast<int32_t>(m) ^ ng) - ng;
      }
      if constexpr (Out == 1)
        c8[i] = static_cast<uint8_t>(code);
      else
        c16[i] = static_cast<uint16_t>(code);
    }
  }
  return clipped;
}

template <int Kind, int Op>
inline __attribute__((always_inline)) int64_t by_out(const ScaledParams& sp, const GroupArith& ga,
                                                     const float* x, int n, float* values,
                                                     void* codes) {
  if (values) {
    const int64_t clipped = scaled_loop<Kind, Op, 0>(sp, ga, x, n, values, codes);
    if (!codes) return clipped;
    // Both asked (cast_standard_with_values): the codes from their own loop, the same count.
  }
  if (sp.code_bytes == 1) return scaled_loop<Kind, Op, 1>(sp, ga, x, n, values, codes);
  return scaled_loop<Kind, Op, 2>(sp, ga, x, n, values, codes);
}

// Groups k = 0 .. groups - 1 of len values each, group k with arithmetic ga[k].
template <int Kind, int Op>
inline __attribute__((always_inline)) int64_t run_groups(const ScaledParams& sp,
                                                         const GroupArith* ga, int groups, int len,
                                                         const float* x, float* values,
                                                         void* codes) {
  int64_t clipped = 0;
  uint8_t* c = static_cast<uint8_t*>(codes);
  for (int k = 0; k < groups; ++k) {
    const int64_t o = static_cast<int64_t>(k) * len;
    clipped += by_out<Kind, Op>(sp, ga[k], x + o, len, values ? values + o : nullptr,
                                c ? c + o * sp.code_bytes : nullptr);
  }
  return clipped;
}

template <int Kind>
inline __attribute__((always_inline)) int64_t by_op(const ScaledParams& sp, const GroupArith* ga,
                                                    int groups, int len, const float* x,
                                                    float* values, void* codes) {
  switch (ga[0].op) {
    case 0:
      return run_groups<Kind, 0>(sp, ga, groups, len, x, values, codes);
    case 1:
      return run_groups<Kind, 1>(sp, ga, groups, len, x, values, codes);
    case 2:
      return run_groups<Kind, 2>(sp, ga, groups, len, x, values, codes);
    default:
      return run_groups<Kind, 3>(sp, ga, groups, len, x, values, codes);
  }
}

#define CASTSCOPE_CLONES __attribute__((target_clones("avx2", "default")))

CASTSCOPE_CLONES int64_t scaled_float(const ScaledParams& sp, const GroupArith* ga, int groups,
                                      int len, const float* x, float* values, void* codes) {
  return by_op<0>(sp, ga, groups, len, x, values, codes);
}
CASTSCOPE_CLONES int64_t scaled_int(const ScaledParams& sp, const GroupArith* ga, int groups,
                                    int len, const float* x, float* values, void* codes) {
  return by_op<1>(sp, ga, groups, len, x, values, codes);
}
CASTSCOPE_CLONES int64_t scaled_uint(const ScaledParams& sp, const GroupArith* ga, int groups,
                                     int len, const float* x, float* values, void* codes) {
  return by_op<2>(sp, ga, groups, len, x, values, codes);
}

}  // namespace

bool scaled_ok(const detail::KernelParams& kp) {
  const scalar::Format& f = kp.data;
  if (!kp.scaled || kp.scale_is_exponent || kp.round != scalar::Round::Even) return false;
  if (kp.data_codes.bits > 16) return false;
  if (f.kind == scalar::Kind::Float) {
    return usual_code_layout(f) && f.mbits <= 23 && f.maxe < 900 && f.qmin > -900;
  }
  // Plain integer grids (quantum 1) below 2^31, where the magic add stays exact.
  return (f.kind == scalar::Kind::Int || f.kind == scalar::Kind::UInt) && f.qmin == 0 &&
         f.maxe == 0 && f.maxr < (1ull << 31);
}

ScaledParams make_scaled_params(const detail::KernelParams& kp, int code_bytes) {
  const scalar::Format& f = kp.data;
  ScaledParams sp;
  sp.kind = f.kind == scalar::Kind::Float ? 0 : f.kind == scalar::Kind::Int ? 1 : 2;
  sp.mgrid = f.kind == scalar::Kind::Float ? f.mgrid : 2000;
  sp.qmin = f.qmin;
  sp.maxval = scalar::ldexp_int(f.maxr, f.maxe);
  sp.keep_negzero = f.kind == scalar::Kind::Float && kp.data_codes.has_negzero;
  sp.code_bits = f.bits;
  sp.code_base = f.mbits + f.bias - 1;
  sp.mbits = f.mbits;
  sp.code_bytes = code_bytes;
  return sp;
}

ScaleChoice make_scale_choice(const detail::KernelParams& kp) {
  const scalar::Format& f = kp.scale;
  ScaleChoice c;
  c.ok = kp.zero_kind == 0 && f.kind == scalar::Kind::Float && f.bits <= 32 && f.mbits <= 23 &&
         usual_code_layout(f) && f.maxe < 900 && f.qmin > -900 && kp.data_max > 0;
  c.multi = kp.multiscale;
  c.data_max = kp.data_max;
  c.mgrid = f.mgrid;
  c.qmin = f.qmin;
  c.maxval = scalar::ldexp_int(f.maxr, f.maxe);
  c.base = f.mbits + f.bias - 1;
  c.mbits = f.mbits;
  return c;
}

CASTSCOPE_CLONES int choose_scales(const ScaleChoice& c, double t, const uint32_t* amax_bits, int n,
                                   GroupArith* ga, uint32_t* codes) {
  const double data_max = c.data_max, maxval = c.maxval;
  const int64_t mgrid = c.mgrid, qmin = c.qmin;
  const int32_t base = c.base, mbits = c.mbits;
  const bool multi = c.multi;
  if (multi && !(t == t)) return 0;  // a NaN tensor scale makes every group NaN
  double s[256];
  for (int k = 0; k < n; ++k) {
    const double a = scalar::bits_float(amax_bits[k]);
    const double raw = (multi ? a / t : a) / data_max;
    const uint64_t rb = double_bits(raw);
    const int64_t b = static_cast<int64_t>(rb >> 52 & 0x7FF) - 1023;
    const int64_t qe = b - mgrid > qmin ? b - mgrid : qmin;
    const double magic = bits_double(static_cast<uint64_t>(qe + 52 + 1023) << 52 | 1ull << 51);
    const double rv = (raw + magic) - magic;
    const double m = rv > maxval ? maxval : rv;
    const int64_t e = static_cast<int64_t>(double_bits(m) >> 52) - 1023;
    const int64_t q2 = e - mgrid > qmin ? e - mgrid : qmin;
    const uint32_t r = static_cast<uint32_t>(
        static_cast<int32_t>(m * bits_double(static_cast<uint64_t>(1023 - q2) << 52)));
    codes[k] = (static_cast<uint32_t>(q2 + base) << mbits) + r;
    s[k] = m;
  }
  int ok = 0;
  while (ok < n && s[ok] != 0) ++ok;
  for (int k = 0; k < ok; ++k) {
    ga[k].op = multi ? 1 : 0;
    ga[k].a = s[k];
    ga[k].b = t;
    ga[k].div = multi ? s[k] * t : s[k];
  }
  return ok;
}

bool group_arith(const detail::KernelParams& kp, const detail::GroupScale& g, GroupArith& out) {
  if (g.nan || !(g.s != 0.0)) return false;
  if (kp.zero_kind == 1) {
    out.op = 2;
    out.a = g.s;
    out.b = g.zero;
  } else if (kp.zero_kind == 2) {
    out.op = 3;
    out.a = g.s;
    out.b = g.zero;
  } else if (kp.multiscale) {
    out.op = 1;
    out.a = g.s;
    out.b = g.t;
    out.div = g.s * g.t;
  } else {
    out.op = 0;
    out.a = g.s;
    out.div = g.s;
  }
  return true;
}

CASTSCOPE_CLONES void abs_min_max(const float* x, int64_t n, uint32_t& amax_bits, float& lo,
                                  float& hi) {
  abs_min_max_short(x, n, amax_bits, lo, hi);
}

int64_t cast_scaled_groups(const ScaledParams& sp, const GroupArith* ga, int groups, int len,
                           const float* x, float* values, void* codes) {
  switch (sp.kind) {
    case 0:
      return scaled_float(sp, ga, groups, len, x, values, codes);
    case 1:
      return scaled_int(sp, ga, groups, len, x, values, codes);
    default:
      return scaled_uint(sp, ga, groups, len, x, values, codes);
  }
}

int64_t cast_scaled(const ScaledParams& sp, const GroupArith& ga, const float* x, int n,
                    float* values, void* codes) {
  return cast_scaled_groups(sp, &ga, 1, n, x, values, codes);
}

}  // namespace castscope::cpu::fast
