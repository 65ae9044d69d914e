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
  int width = 0;                // mapping columns per row: the mappings rounded up to 2, 4, 8 or 16
  int row_groups = 0;           // 16-byte groups per magnitude row (8 mappings each)
  int emin = 0;                 // bucket 0 starts at 2^emin
  std::vector<double> thr;      // K midpoints, ascending
  std::vector<uint8_t> bucket;  // kBuckets interval lower bounds
  std::vector<uint8_t> slot;    // (K + 1) * width: slot of mapping m in interval k
  // (K + 1) * row_groups * 8: the top 16 bits of mapping m's magnitude at its slot in interval k
  // (sign, exponent and 4 fraction bits: every magnitude of a compute format with at most 4
  // mantissa bits, which build_lut checks), so that a row of 16 mappings is two 16-byte loads.
  std::vector<uint16_t> hi16;
  // For a search without branches (the CPU's): no bucket holds more than max_steps midpoints, and
  // thr_pad is thr followed by max_steps infinities.
  int max_steps = 0;
  std::vector<double> thr_pad;
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

// interval_of in exactly max_steps steps of `k += a >= thr_pad[k]`: once a threshold is above a,
// k stays.
inline int interval_steps(const Lut& t, double a) {
  int k = t.bucket[bucket_of(a, t.emin)];
  for (int s = 0; s < t.max_steps; ++s) k += a >= t.thr_pad[k];
  return k;
}

// Magnitude of a row entry: the stored top 16 bits of the double.
CS_HD double row_mag(uint16_t h) {
  return scalar::bits_double(static_cast<uint64_t>(h) << 48);
}

// encode_tile over the tables (Lut::ok): the same scale, counts, mapping choices, codes and values
// with one interval lookup per element instead of a midpoint search per element and mapping.
// k: n bytes of scratch. Host only (cb_lut.cpp); the CUDA kernel has its own loop over the same
// tables.
TileResult encode_tile_lut(const Params& p, const Lut& t, const double* x, int n,
                           int64_t subs_per_row, int64_t row, int64_t c0, uint8_t* codes,
                           float* values, uint8_t* meta, uint8_t* k);

}  // namespace castscope::detail::cb
