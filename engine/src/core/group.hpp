// Per-group scale selection and per-element encode/decode, written once for the CPU engine and
// the CUDA kernels (CS_HD). A "group" is the set of values that share one scale: a tile, a
// channel, or the whole tensor.
#pragma once

#include "castscope/scalar.hpp"

namespace castscope::detail {

using scalar::Format;
using scalar::Quantized;

// Plain-data parameters of one cast, copied into kernels.
struct KernelParams {
  Format data;        // grid the values are rounded onto
  Format data_codes;  // format the codes are written in
  Format scale;       // tile / tensor scale format
  Format second;      // zero point or tensor scale format
  bool scaled = false;
  bool scale_is_exponent = false;
  bool multiscale = false;
  int zero_kind = 0;  // 0 none, 1 float, 2 int
  double data_max = 0;
  scalar::Round round = scalar::Round::Even;
  scalar::Overflow overflow = scalar::Overflow::Saturate;
  scalar::ScaleMode scale_mode = scalar::ScaleMode::Floor;
  uint64_t seed = 0;
  double tensor_scale = 1.0;  // multiscale: decoded tensor scale value
  int offset_bits = 0;        // K of t<T>s<S>o<K>: subtile exponent offsets in [0, 2^K - 1]
};

// What a group's scale is chosen from: absmax / lo / hi over its finite values (lo <= 0 <= hi by
// construction) and whether any value is NaN / Inf. The CPU folds chunks and the CUDA kernels fold
// threads, warps and blocks with the same add / merge.
struct GroupStats {
  double absmax = 0, lo = 0, hi = 0;
  bool nonfinite = false;
  CS_HD void add(double v) {
    if (!(v - v == 0)) {
      nonfinite = true;
      return;
    }
    const double a = v < 0 ? -v : v;
    absmax = a > absmax ? a : absmax;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  CS_HD void merge(const GroupStats& o) {
    absmax = o.absmax > absmax ? o.absmax : absmax;
    lo = o.lo < lo ? o.lo : lo;
    hi = o.hi > hi ? o.hi : hi;
    nonfinite |= o.nonfinite;
  }
};

// The scale of one group, as both codes (for storage) and values (for arithmetic).
struct GroupScale {
  bool nan = false;   // the group holds NaN / Inf: every value decodes to NaN
  int shift = 0;      // exponent scales: value = q * 2^shift
  double s = 1.0;     // float scales: value = q * s (* t)
  double t = 1.0;     // tensor scale of a multiscale datatype
  double zero = 0.0;  // float zero point Z (value = q * s + Z) or int zero point z
  uint32_t scale_code = 0;
  uint32_t zero_code = 0;
};

CS_HD double nan_double() {
  return scalar::bits_double(0x7FF8000000000000ull);
}

// Round v onto format f with round-to-nearest-even and saturation: how scales and zero points
// are cast to their own formats.
CS_HD Quantized cast_scale_value(double v, const Format& f) {
  return scalar::quantize(v, f, scalar::Round::Even, scalar::Overflow::Saturate, 0);
}

// The tensor scale of a multiscale datatype (NVFP4's fp32 scale) from the whole tensor's
// statistics: absmax over the largest product of a tile scale and an element, rounded to the
// scale's own format; NaN when the tensor holds NaN / Inf, and 1 when the tensor is all zero (or
// its scale falls below the format).
struct TensorScale {
  double t = 1.0;
  uint32_t code = 0;
};
CS_HD TensorScale choose_tensor_scale(const KernelParams& kp, const GroupStats& st,
                                      double tile_scale_max) {
  TensorScale r;
  if (st.nonfinite) {
    r.code = scalar::nan_code(kp.second);
    r.t = nan_double();
    return r;
  }
  const double raw = st.absmax / (kp.data_max * tile_scale_max);
  r.code = scalar::encode(cast_scale_value(raw, kp.second), kp.second);
  r.t = scalar::decode_value(r.code, kp.second);
  if (!(r.t > 0)) {
    r.code = scalar::encode(cast_scale_value(1.0, kp.second), kp.second);
    r.t = 1.0;
  }
  return r;
}

// Scale of a group from its statistics: absmax over kept finite values; lo / hi (uint data) the
// smallest / largest kept finite value; nonfinite whether any kept value is NaN / Inf.
CS_HD GroupScale choose_scale(const KernelParams& p, double absmax, double lo, double hi,
                              bool nonfinite) {
  GroupScale g;
  g.t = p.multiscale ? p.tensor_scale : 1.0;
  if (nonfinite || (p.multiscale && !(g.t == g.t))) {
    g.nan = true;
    g.scale_code = scalar::nan_code(p.scale);
    if (p.scale.kind == scalar::Kind::Exponent) g.scale_code = (1u << p.scale.bits) - 1;
    g.zero_code = 0;
    return g;
  }
  if (p.scale_is_exponent) {
    const int maxcode = (1 << p.scale.bits) - 2;
    int code = 0;
    if (absmax > 0) {
      const double a = p.multiscale ? absmax / g.t : absmax;
      int e = scalar::select_exponent(a, p.data, p.scale_mode);
      code = e - p.data.emax + p.scale.bias;
      code = code < 0 ? 0 : (code > maxcode ? maxcode : code);
    }
    g.scale_code = static_cast<uint32_t>(code);
    g.shift = code - p.scale.bias;
    g.s = scalar::pow2(g.shift);
    return g;
  }
  double raw;
  if (p.zero_kind != 0) {
    lo = lo < 0 ? lo : 0.0;  // the range always holds zero, so zero stays exact
    hi = hi > 0 ? hi : 0.0;
    raw = (hi - lo) / p.data_max;
  } else {
    raw = (p.multiscale ? absmax / g.t : absmax) / p.data_max;
  }
  Quantized qs = cast_scale_value(raw, p.scale);
  g.scale_code = scalar::encode(qs, p.scale);
  g.s = scalar::value_of(scalar::decode(g.scale_code, p.scale), 0);
  if (p.zero_kind == 1) {
    Quantized qz = cast_scale_value(lo, p.second);
    g.zero_code = scalar::encode(qz, p.second);
    g.zero = scalar::value_of(scalar::decode(g.zero_code, p.second), 0);
  } else if (p.zero_kind == 2) {
    // Integer zero point z = round(-lo / s), in the zero point's own integer range.
    double z = g.s > 0 ? -lo / g.s : 0.0;
    Format zf = p.second;
    zf.qmin = zf.maxe = 0;  // plain integers
    zf.maxbinade = 0;
    for (uint64_t t = zf.maxr; t > 1; t >>= 1) ++zf.maxbinade;
    Quantized qz = cast_scale_value(z, zf);
    g.zero_code = scalar::encode(qz, zf);
    g.zero = qz.neg ? -static_cast<double>(qz.r) : static_cast<double>(qz.r);
  }
  return g;
}

// Exponent offset of a subtile below its tile's scale g (t<T>s<S>o<K>; MX9 / MX6 / MX4 are o1):
// how many binades the subtile's own shared exponent (same scale mode, from a, its largest kept
// finite magnitude) sits below the tile's, at most 2^K - 1. An all-zero subtile takes the largest
// offset, as an exponent below every other would.
CS_HD int subtile_offset(const KernelParams& p, const GroupScale& g, double a) {
  if (g.nan) return 0;
  const int most = (1 << p.offset_bits) - 1;
  if (a == 0) return most;
  const int own = scalar::select_exponent(p.multiscale ? a / g.t : a, p.data, p.scale_mode);
  const int d = g.shift + p.data.emax - own;
  return d < 0 ? 0 : (d > most ? most : d);
}

// The scaled value handed to the quantizer, for input x of a group with scale g; shift_adj
// lowers an exponent scale by a subtile's exponent offset.
CS_HD double scaled_input(const KernelParams& p, const GroupScale& g, double x, int shift_adj) {
  if (!p.scaled) return x;
  if (p.scale_is_exponent)
    return x * scalar::pow2(-(g.shift - shift_adj)) / (p.multiscale ? g.t : 1.0);
  if (p.zero_kind == 1) return (x - g.zero) / g.s;
  if (p.zero_kind == 2) return x / g.s + g.zero;
  return x / (p.multiscale ? g.s * g.t : g.s);
}

// Canonical form of a rounded value: what decode(encode(q)) gives back.
CS_HD Quantized canonical(Quantized q, const Format& codes) {
  if (q.r == 0 && !q.nan && !q.inf && (!codes.has_negzero || codes.kind != scalar::Kind::Float))
    q.neg = false;
  if (q.nan && !codes.has_nan) q = Quantized{};  // no NaN code: zero (spec README, decision 5)
  return q;
}

// Encode one element: the quantized value in the code grid. NaN / Inf inputs follow the policy
// of unscaled casts; in scaled groups the group scale says NaN and codes are zero.
CS_HD Quantized encode_element(const KernelParams& p, const GroupScale& g, double x, int shift_adj,
                               uint64_t index) {
  Quantized q;
  if (!(x == x)) {  // NaN
    q.nan = !p.scaled;
    return canonical(q, p.data_codes);
  }
  if (x - x != 0) {  // +-Inf
    if (p.scaled) return q;
    q.neg = x < 0;
    if (p.overflow == scalar::Overflow::IEEE && p.data.has_inf)
      q.inf = true;
    else if (p.overflow == scalar::Overflow::IEEE && p.data.has_nan)
      q.nan = true;
    else {
      q.r = p.data.maxr;
      q.qe = p.data.maxe;
    }
    return canonical(q, p.data_codes);
  }
  if (p.scaled && (g.nan || g.s == 0.0)) {
    if (p.zero_kind == 2 && !g.nan) {  // uint with int zero and zero scale: code z decodes to 0
      q.r = static_cast<uint64_t>(g.zero < 0 ? 0 : g.zero);
    }
    // A zero scale rounds every value to zero; keep its sign where the format has -0.
    q.neg = !g.nan && p.zero_kind == 0 && (scalar::double_bits(x) >> 63) != 0;
    return canonical(q, p.data_codes);
  }
  const uint32_t rnd =
      p.round == scalar::Round::Stochastic ? scalar::random_bits(p.seed, index) : 0u;
  const scalar::Overflow ovf = p.scaled ? scalar::Overflow::Saturate : p.overflow;
  q = scalar::quantize(scaled_input(p, g, x, shift_adj), p.data, p.round, ovf, rnd);
  return canonical(q, p.data_codes);
}

// Value (float32) of an element from its quantized code and its group's scale.
CS_HD float decode_element(const KernelParams& p, const GroupScale& g, const Quantized& q,
                           int shift_adj) {
  if (!p.scaled) return scalar::to_f32(scalar::value_of(q, 0));
  if (g.nan) return scalar::to_f32(nan_double());
  if (p.scale_is_exponent) {
    double v = scalar::value_of(q, g.shift - shift_adj);
    return scalar::to_f32(p.multiscale ? v * g.t : v);
  }
  const double qv = scalar::value_of(q, 0);
  if (p.zero_kind == 1) return scalar::to_f32(qv * g.s + g.zero);
  if (p.zero_kind == 2) return scalar::to_f32((qv - g.zero) * g.s);
  return scalar::to_f32(p.multiscale ? qv * g.s * g.t : qv * g.s);
}

// Scale of a group rebuilt from stored codes (upcast of an actual / compressed result).
CS_HD GroupScale scale_from_codes(const KernelParams& p, uint32_t scale_code, uint32_t zero_code) {
  GroupScale g;
  g.t = p.multiscale ? p.tensor_scale : 1.0;
  g.scale_code = scale_code;
  g.zero_code = zero_code;
  Quantized qs = scalar::decode(scale_code, p.scale);
  if (qs.nan || qs.inf || (p.multiscale && !(g.t == g.t))) {
    g.nan = true;
    return g;
  }
  if (p.scale_is_exponent) {
    g.shift = static_cast<int>(scale_code) - p.scale.bias;
    g.s = scalar::pow2(g.shift);
    return g;
  }
  g.s = scalar::value_of(qs, 0);
  if (p.zero_kind == 1) g.zero = scalar::value_of(scalar::decode(zero_code, p.second), 0);
  if (p.zero_kind == 2) {
    Quantized qz = scalar::decode(zero_code, p.second);
    g.zero = qz.neg ? -static_cast<double>(qz.r) : static_cast<double>(qz.r);
  }
  return g;
}

}  // namespace castscope::detail
