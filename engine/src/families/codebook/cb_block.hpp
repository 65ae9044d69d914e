// One codebook tile, for the CPU engine and the CUDA kernels alike: the tile's scale comes from
// the standard group code (group.hpp) over the compute format; each subtile then picks the
// mapping with the least squared error and every element the nearest entry of that mapping.
// Sums run sequentially in element order without fused multiply-adds so that every backend
// makes the same choice.
#pragma once

#include "core/group.hpp"

namespace castscope::detail::cb {

struct Params {
  KernelParams kp;  // scale selection over the compute format
  int half = 0;     // H = 2^(I-1): entries H..2H-1 of a mapping are its non-negative half
  int nmaps = 0;
  int tile = 0;                  // elements per scale
  int sub = 0;                   // elements per mapping choice (tile when there are no subtiles)
  const double* mags = nullptr;  // nmaps * half magnitudes: entry H+j of mapping m at [m*half+j]
};

using scalar::add_rn;
using scalar::mul_rn;

CS_HD bool sign_bit(double x) {
  return (scalar::double_bits(x) >> 63) != 0;
}

// |x| in the compute format's units.
CS_HD double scaled_abs(const Params& p, const GroupScale& g, double x) {
  const double a = x < 0 ? -x : x;
  return p.kp.scale_is_exponent ? a * scalar::pow2(-g.shift) : a / g.s;
}

// Magnitude of the mapped value: exact (a short compute value times a scale).
CS_HD double unscale(const Params& p, const GroupScale& g, double mag) {
  return p.kp.scale_is_exponent ? mag * scalar::pow2(g.shift) : mag * g.s;
}

// Slot of the nearest magnitude at TensorCast's midpoints: halfway between neighbouring
// non-negative entries, a tie going to the larger one, everything past the last midpoint to the
// largest. Repeated zeros (a pattern shifted off the number line) are never chosen over slot 0.
CS_HD int nearest_slot(const double* mag, int half, double a) {
  int best = 0;
  double prev = 0;
  for (int j = 1; j < half; ++j) {
    const double v = mag[j];
    if (!(v > 0)) continue;
    if (a >= (prev + v) * 0.5) best = j;
    prev = v;
  }
  return best;
}

CS_HD uint32_t code_of(int half, int slot, bool neg) {
  return static_cast<uint32_t>(neg ? half - 1 - slot : half + slot);
}

// A scale that maps values onto the mappings: not NaN, and for float scales not zero (a zero scale
// takes every value to slot 0).
CS_HD bool scale_usable(const Params& p, const GroupScale& g) {
  return !g.nan && (p.kp.scale_is_exponent || g.s > 0);
}

// Encodes the n values of one subtile; writes codes and/or values (either may be null) and
// returns the chosen mapping. A group whose scale is NaN writes the +0 code and NaN values.
// X is anything with x[i] giving the value as a double and x + k (a pointer, or a device view of
// a typed input), so that GPU kernels read bfloat16 / float16 / float32 input without a copy.
template <class X>
CS_HD int encode_sub(const Params& p, const GroupScale& g, const X& x, int n, uint8_t* codes,
                     float* values) {
  const bool usable = scale_usable(p, g);
  int best = 0;
  if (usable) {
    double best_sse = 0;
    for (int m = 0; m < p.nmaps; ++m) {
      const double* mag = p.mags + m * p.half;
      double sse = 0;
      for (int i = 0; i < n; ++i) {
        const double xi = x[i];
        const double a = xi < 0 ? -xi : xi;
        const int j = nearest_slot(mag, p.half, scaled_abs(p, g, xi));
        const double d = add_rn(unscale(p, g, mag[j]), -a);
        sse = add_rn(sse, mul_rn(d, d));
      }
      if (m == 0 || sse < best_sse) {
        best = m;
        best_sse = sse;
      }
    }
  }
  const double* mag = p.mags + best * p.half;
  for (int i = 0; i < n; ++i) {
    const double xi = x[i];
    const bool neg = sign_bit(xi);
    int j = 0;
    if (usable) j = nearest_slot(mag, p.half, scaled_abs(p, g, xi));
    if (codes) codes[i] = static_cast<uint8_t>(code_of(p.half, j, neg && !g.nan));
    if (values) {
      const double v = unscale(p, g, mag[j]);
      values[i] = g.nan ? scalar::to_f32(nan_double()) : scalar::to_f32(neg ? -v : v);
    }
  }
  return best;
}

// Value of a stored code of mapping m in a group of scale g.
CS_HD float decode(const Params& p, const GroupScale& g, int m, uint32_t code) {
  if (g.nan) return scalar::to_f32(nan_double());
  const bool neg = static_cast<int>(code) < p.half;
  const int j = neg ? p.half - 1 - static_cast<int>(code) : static_cast<int>(code) - p.half;
  const double v = unscale(p, g, p.mags[m * p.half + j]);
  return scalar::to_f32(neg ? -v : v);
}

struct TileResult {
  uint32_t scale_code = 0;
  int clipped = 0;
  int nonfinite = 0;
};

// The scale of a tile of n values: from the finite values' absmax; a NaN or Inf (counted in
// nonfinite) makes the whole tile NaN.
template <class X>
CS_HD GroupScale tile_scale(const Params& p, const X& x, int n, int& nonfinite) {
  double absmax = 0;
  for (int i = 0; i < n; ++i) {
    const double xi = x[i];
    const double a = xi < 0 ? -xi : xi;
    if (!(a - a == 0)) {
      ++nonfinite;
    } else if (a > absmax) {
      absmax = a;
    }
  }
  return choose_scale(p.kp, absmax, 0, 0, nonfinite > 0);
}

// Each subtile's mapping, codes and values for a tile of n values (n < tile at the end of a row)
// starting at column c0 of a row, whose scale g is chosen. codes / values point at the tile's
// first element; meta at the whole meta array.
template <class X>
CS_HD void encode_subtiles(const Params& p, const GroupScale& g, const X& x, int n,
                           int64_t subs_per_row, int64_t row, int64_t c0, uint8_t* codes,
                           float* values, uint8_t* meta) {
  for (int s0 = 0; s0 < p.tile; s0 += p.sub) {
    const int ns = n - s0 < p.sub ? n - s0 : p.sub;
    int m = 0;
    if (ns > 0)
      m = encode_sub(p, g, x + s0, ns, codes ? codes + s0 : nullptr,
                     values ? values + s0 : nullptr);
    if (meta) meta[row * subs_per_row + (c0 + s0) / p.sub] = static_cast<uint8_t>(m);
  }
}

// One tile: its scale, the count of clipped values, then each subtile's mapping and codes.
template <class X>
CS_HD TileResult encode_tile(const Params& p, const X& x, int n, int64_t subs_per_row, int64_t row,
                             int64_t c0, uint8_t* codes, float* values, uint8_t* meta) {
  TileResult r;
  const GroupScale g = tile_scale(p, x, n, r.nonfinite);
  r.scale_code = g.scale_code;
  if (scale_usable(p, g))
    for (int i = 0; i < n; ++i) r.clipped += scaled_abs(p, g, x[i]) > p.kp.data_max;
  encode_subtiles(p, g, x, n, subs_per_row, row, c0, codes, values, meta);
  return r;
}

}  // namespace castscope::detail::cb
