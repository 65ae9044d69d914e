// Interval tables for the codebook kernels. Every mapping's nearest_slot compares the scaled
// magnitude with that mapping's midpoints only, so the sorted union of all mappings' midpoints
// splits the magnitude axis into intervals inside which every mapping's slot is fixed. One lookup
// of the interval then replaces a midpoint search per mapping, and a row per interval holds each
// mapping's slot and magnitude: what the squared-error sums need, with the same double operations
// as encode_sub (cb_block.hpp), hence the same choices.
#pragma once

#include <vector>

#include "codebook/cb_block.hpp"

namespace castscope::detail::cb {

// Buckets of 1/8 octave over 256 octaves from 2^emin: a bucket's entry counts the thresholds at or
// below its lower end, a lower bound on the interval of every magnitude inside it.
constexpr int kBucketBits = 11;
constexpr int kBuckets = 1 << kBucketBits;

struct Lut {
  bool ok = false;              // false: fall back to encode_tile (see why)
  const char* why = "";         // the limit that was hit
  int nthr = 0;                 // K distinct midpoints; intervals 0..K
  int nmaps = 0;                // mappings with a slot column (the datatype's)
  int width = 0;                // mapping columns per row: nmaps rounded up to 2, 4, 8 or 16
  int row_groups = 0;           // 16-byte groups per magnitude row (8 mappings each)
  int emin = 0;                 // bucket 0 starts at 2^emin
  std::vector<double> thr;      // K midpoints, ascending
  std::vector<uint8_t> bucket;  // kBuckets interval lower bounds
  std::vector<uint8_t> slot;    // (K + 1) * width: slot of mapping m in interval k
  // (K + 1) * row_groups * 8: the top 16 bits of mapping m's magnitude at its slot in interval k
  // (sign, exponent and 4 fraction bits: every magnitude of a compute format with at most 4
  // mantissa bits, which build_lut checks), so that a row of 16 mappings is two 16-byte loads.
  std::vector<uint16_t> hi16;
};

Lut build_lut(const Params& p);

CS_HD int bucket_of(double a, int emin) {
  const uint32_t hi = static_cast<uint32_t>(scalar::double_bits(a) >> 32);
  const int e = static_cast<int>(hi >> 20) - 1023 - emin;
  if (e < 0) return 0;
  if (e > 255) return kBuckets - 1;
  return (e << 3) | static_cast<int>((hi >> 17) & 7u);
}

// Interval of a non-negative scaled magnitude a: the number of midpoints at or below it.
CS_HD int interval_of(const double* thr, const uint8_t* bucket, int nthr, int emin, double a) {
  int k = bucket[bucket_of(a, emin)];
  while (k < nthr && a >= thr[k]) ++k;
  return k;
}

// Magnitude of a row entry: the stored top 16 bits of the double.
CS_HD double row_mag(uint16_t h) {
  return scalar::bits_double(static_cast<uint64_t>(h) << 48);
}

// encode_tile over the tables (Lut::ok): the same scale, counts, mapping choices, codes and values
// with one interval lookup per element instead of a midpoint search per element and mapping.
// R: the row entries summed per element (8 or 16, at least the mappings); k: n bytes of scratch.
template <int R, class X>
TileResult encode_tile_lut(const Params& p, const Lut& t, const X& x, int n, int64_t subs_per_row,
                           int64_t row, int64_t c0, uint8_t* codes, float* values, uint8_t* meta,
                           uint8_t* k) {
  TileResult r;
  double absmax = 0;
  for (int i = 0; i < n; ++i) {
    const double xi = x[i];
    const double a = xi < 0 ? -xi : xi;
    if (!(a - a == 0))
      ++r.nonfinite;
    else if (a > absmax)
      absmax = a;
  }
  const GroupScale g = choose_scale(p.kp, absmax, 0, 0, r.nonfinite > 0);
  if (g.nan || (!p.kp.scale_is_exponent && !(g.s > 0)))
    return encode_tile(p, x, n, subs_per_row, row, c0, codes, values, meta);
  r.scale_code = g.scale_code;
  const double up = p.kp.scale_is_exponent ? scalar::pow2(g.shift) : g.s;
  for (int i = 0; i < n; ++i) {
    const double xi = x[i];
    // scaled_abs of +|x|: a negative zero would read as a huge magnitude's bits.
    const double as = scaled_abs(p, g, xi < 0 ? -xi : xi + 0.0);
    r.clipped += as > p.kp.data_max;
    k[i] = static_cast<uint8_t>(interval_of(t.thr.data(), t.bucket.data(), t.nthr, t.emin, as));
  }
  const int rw = t.row_groups * 8;
  for (int s0 = 0; s0 < p.tile; s0 += p.sub) {
    const int ns = n - s0 < p.sub ? n - s0 : p.sub;
    int best = 0;
    if (ns > 0) {
      double sse[R] = {};
      for (int i = s0; i < s0 + ns; ++i) {
        const double xi = x[i];
        const double a = xi < 0 ? -xi : xi;
        const uint16_t* h = t.hi16.data() + k[i] * rw;
        for (int m = 0; m < R; ++m) {
          const double d = add_rn(mul_rn(row_mag(h[m]), up), -a);
          sse[m] = add_rn(sse[m], mul_rn(d, d));
        }
      }
      double best_sse = sse[0];
      for (int m = 1; m < p.nmaps; ++m)
        if (sse[m] < best_sse) {
          best = m;
          best_sse = sse[m];
        }
      for (int i = s0; i < s0 + ns; ++i) {
        const bool neg = sign_bit(x[i]);
        if (codes)
          codes[i] = static_cast<uint8_t>(code_of(p.half, t.slot[k[i] * t.width + best], neg));
        if (values) {
          const double v = mul_rn(row_mag(t.hi16[k[i] * rw + best]), up);
          values[i] = scalar::to_f32(neg ? -v : v);
        }
      }
    }
    if (meta) meta[row * subs_per_row + (c0 + s0) / p.sub] = static_cast<uint8_t>(best);
  }
  return r;
}

}  // namespace castscope::detail::cb
