// Fast path of the CPU engine for the common casts: float32 input, exponent scale (or none), no
// sparsity / subtiles / tensor scale. It works on float32 bits with 32-bit integer arithmetic the
// compiler vectorizes, and produces exactly what the generic path (scalar::quantize in double)
// produces; tile_ok() says when that holds, and callers fall back to the generic path otherwise.
#pragma once

#include <algorithm>
#include <cstdint>

#include "castscope/scalar.hpp"

namespace castscope::cpu::fast {

struct TileParams {
  int mgrid;  // format grid: quantum exponent = max(binade - mgrid, qmin)
  int qmin;
  int maxe;  // largest finite = maxr * 2^maxe
  uint32_t maxr;
  int mode;  // scalar::Round
  bool keep_negzero;
  uint64_t seed;
};

inline TileParams make_params(const scalar::Format& f, scalar::Round round, uint64_t seed) {
  TileParams t;
  t.mgrid = f.mgrid > 30 ? 30 : f.mgrid;  // integers: any value above binade qmin+30 overflows
  t.qmin = f.qmin;
  t.maxe = f.maxe;
  t.maxr = static_cast<uint32_t>(f.maxr);
  t.mode = static_cast<int>(round);
  t.keep_negzero = f.kind == scalar::Kind::Float && f.has_negzero;
  t.seed = seed;
  return t;
}

// Whether scale shift s keeps every intermediate exactly representable in float32: the grid's
// smallest quantum times 2^s is at least 2^-149, float32 subnormal inputs sit below the grid's
// normal range (so their unnormalized significand gives the same quantum), every in-range value
// keeps at least one bit below its quantum, and the largest value times 2^s stays finite.
inline bool tile_ok(const scalar::Format& f, int s) {
  if (f.kind == scalar::Kind::Float) {
    if (f.mbits > 22) return false;
  } else if (f.kind == scalar::Kind::Int) {
    if (-f.qmin > 22) return false;
  } else {
    return false;
  }
  const int emin_grid = f.kind == scalar::Kind::Float ? f.emin : f.qmin;
  return s + f.qmin >= -149 && s >= -126 - emin_grid && s + f.maxbinade <= 127;
}

// One value: the same steps as scalar::quantize on float32 bits. Branch-free apart from the
// compile-time round mode, so the loops below vectorize.
template <int Mode>
inline void cast_one(const TileParams& t, uint32_t u, int s, uint64_t index, uint32_t& r_out,
                     int& qe_out, uint32_t& neg_out, uint32_t& over_out) {
  // Bitwise rather than short-circuit logic throughout: no control flow, so it vectorizes.
  const uint32_t sign = u >> 31;
  const uint32_t mag = u & 0x7FFFFFFFu;
  const int e = static_cast<int>(mag >> 23);
  const uint32_t normal = e != 0;
  const uint32_t m = (mag & 0x7FFFFFu) | (normal << 23);
  const int b =
      (e + static_cast<int>(normal ^ 1u)) - 127 - s;  // binade of x*2^-s (a floor for subnormal x)
  const int qexp = std::max(b - t.mgrid, t.qmin);
  const int dt = qexp - (b - 23);  // significand bits below the quantum
  const uint32_t huge = dt < 1;    // integers far above their grid
  const int d = std::min(std::max(dt, 1), 31);
  const uint32_t small = dt >= 32;
  uint32_t r = (m >> d) & (small - 1u);
  const uint32_t rem = small ? m : m & ((1u << d) - 1);
  const uint32_t half = small ? 0xFFFFFFFFu : 1u << (d - 1);  // m < 2^24: never a tie
  uint32_t up;
  if constexpr (Mode == 0)
    up = (rem > half) | ((rem == half) & r);
  else if constexpr (Mode == 1)
    up = rem >= half;
  else if constexpr (Mode == 2)
    up = rem > half;
  else {
    const int fd = std::max(dt, 1);
    const uint32_t frac =
        fd <= 32 ? rem << (32 - fd) : (fd - 32 < 32 ? rem >> ((fd - 32) & 31) : 0u);
    up = scalar::random_bits(t.seed, index) < frac;
  }
  r += up & 1u;
  const uint32_t over = huge | (qexp > t.maxe) | ((qexp == t.maxe) & (r > t.maxr));
  r_out = over ? t.maxr : r;
  qe_out = over ? t.maxe : qexp;
  neg_out = sign & ((r_out != 0) | static_cast<uint32_t>(t.keep_negzero));
  over_out = over;
}

// Whether float format f has the usual code layout the fast code formulas assume: subnormals at
// qmin = emin - mbits = 1 - bias - mbits, the quantum of normals mbits below their binade.
inline bool usual_code_layout(const scalar::Format& f) {
  return f.mgrid == f.mbits && f.qmin + f.mbits + f.bias - 1 == 0;
}

// How the fast paths write a rounded value r * 2^qe as a code: the layout of scalar::encode for
// the formats whose subnormals sit at qmin = 1 - bias - mbits, as one branch-free expression.
struct CodeParams {
  int kind = 0;  // 0 float: ((qe + base) << mbits) + r, sign on top; 1 integer: -r or r
  int base = 0;  // mbits + bias - 1
  int mbits = 0;
  int sign_bit = 0;  // bits - 1
  int bytes = 0;     // storage bytes per code (1 or 2); 0: the fast encoding does not apply
};

// Parameters for codes of format f stored in `bytes`-byte elements; bytes = 0 where scalar::encode
// must write them.
CodeParams make_code_params(const scalar::Format& f, size_t bytes);

// One code: the same bits as scalar::encode for a finite rounded value with r <= 2^(mbits + 1)
// (r = 0 only at qe = qmin), for formats make_code_params accepts. A carry r = 2^(mbits + 1)
// lands on the next binade's first code.
inline int32_t encode_fast(const CodeParams& c, uint32_t r, int qe, uint32_t neg) {
  const int32_t ri = static_cast<int32_t>(r);
  if (c.kind == 0)
    return (((qe + c.base) << c.mbits) + ri) | static_cast<int32_t>(neg << c.sign_bit);
  return neg ? -ri : ri;
}

// Largest |x| bit pattern of n float32 values (NaN / Inf show as >= 0x7F800000).
uint32_t abs_max_bits(const float* x, int64_t n);

// Whether an unscaled cast (values, or codes when `codes`) is bfloat16 rounded to nearest even.
bool bf16_unscaled(const TileParams& t, const CodeParams& c, bool codes);
// That cast of n float32 values, to values or codes, in one pass: NaN / Inf inputs are not
// checked first but reported (`nonfinite`), and the caller redoes the range on the generic path.
// Returns the number of saturated values.
int64_t cast_bf16(const float* x, int n, float* values, uint16_t* codes, bool& nonfinite);

// Casts n float32 values with scale shift s straight to codes (c.bytes per code, at codes);
// returns the number of saturated values.
int64_t cast_tile_codes(const TileParams& t, const CodeParams& c, const float* x, int n, int s,
                        uint64_t first_index, void* codes);

// Casts n float32 values with scale shift s (the caller has checked tile_ok and, for scaled
// groups, that no value is NaN / Inf). Writes values (virtual) or the rounded (r, qexp, neg)
// triples for encoding; returns the number of saturated values.
int64_t cast_tile(const TileParams& t, const float* x, int n, int s, uint64_t first_index,
                  float* values, uint32_t* rr, int32_t* qq, uint8_t* neg);

}  // namespace castscope::cpu::fast
