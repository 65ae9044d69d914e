// Interval tables for the codebook kernels. Every mapping's nearest_slot compares the scaled
// magnitude with that mapping's midpoints only, so the sorted union of all mappings' midpoints
// splits the magnitude axis into intervals inside which every mapping's slot is fixed. One lookup
// of the interval then replaces a midpoint search per mapping, and a row per interval holds each
// mapping's slot and magnitude: what the squared-error sums need, with the same double operations
// as encode_sub (cb_block.hpp), hence the same choices.
#pragma once

#include <vector>

#include "families/codebook/cb_block.hpp"

namespace castscope::detail::cb {

// The bucket table splits each octave from 2^emin up to the largest midpoint's octave into
// 2^sub_bits buckets: a bucket's entry counts the midpoints at or below its lower end. Midpoints
// of magnitudes with few significant bits have few bits themselves, so with sub_bits as large as
// the most fraction bits of any midpoint every midpoint is the lower end of a bucket and the entry
// is the interval of every magnitude in the bucket (max_steps = 0). Where the table would exceed
// kMaxBuckets, sub_bits is smaller and up to max_steps comparisons with the midpoints follow.
// A row of zeros (the octave below 2^emin) leads the table and one entry of K ends it, so that a
// magnitude's bucket is its exponent and top fraction bits, clamped: no branch.
constexpr int kMaxBuckets = 2048;

struct LutIndex {
  int nthr = 0;       // K distinct midpoints; intervals 0..K
  int emin = 0;       // the first bucket starts at 2^emin, the smallest midpoint's octave
  int octaves = 0;    // up to the largest midpoint's octave
  int sub_bits = 0;   // buckets per octave: 2^sub_bits (at most 20)
  int max_steps = 0;  // midpoints inside any bucket (0: the entry is the interval)
  // Table entries: the row of zeros, the octaves' buckets and the final entry.
  CS_HD int buckets() const { return ((octaves + 1) << sub_bits) + 1; }
};

struct Lut {
  bool ok = false;              // false: fall back to encode_tile (see why)
  const char* why = "";         // the limit that was hit
  LutIndex ix;                  // how a magnitude finds its bucket, and K (ix.nthr)
  int width = 0;                // mapping columns per row: the mappings rounded up to 2, 4, 8 or 16
  int row_groups = 0;           // 16-byte groups per magnitude row (8 mappings each)
  std::vector<double> thr;      // K midpoints, ascending
  std::vector<uint8_t> bucket;  // ix.buckets() interval lower bounds
  std::vector<uint8_t> slot;    // (K + 1) * width: slot of mapping m in interval k
  // (K + 1) * row_groups * 8: the top 16 bits of mapping m's magnitude at its slot in interval k
  // (sign, exponent and 4 fraction bits: every magnitude of a compute format with at most 4
  // mantissa bits, which build_lut checks), so that a row of 16 mappings is two 16-byte loads.
  std::vector<uint16_t> hi16;
  // (K + 1) * width: bit m' of entry (k, m) is set when mappings m' and m have the same magnitude
  // in interval k. Mappings that agree on every element of a subtile have equal sums however they
  // are formed, so a float sum equal to the best one's settles such a tie (the lower index wins).
  std::vector<uint16_t> same;
  // For a search without branches (the CPU's): thr followed by max_steps infinities.
  std::vector<double> thr_pad;
};

Lut build_lut(const Params& p);

// The table index of a key: a magnitude's exponent field and its top sub_bits fraction bits, as
// one integer (its bits shifted right), less key0, the key of the row of zeros.
CS_HD int bucket_index(int key, int key0, const LutIndex& ix) {
  const int i = key - key0, top = ix.buckets() - 1;
  return i < top ? (i > 0 ? i : 0) : top;
}

// The bucket's lower bound on the interval of a non-negative double (zero and subnormals read as
// the exponent -1023, below every midpoint: build_lut keeps midpoints in the normal range).
CS_HD int interval_base(const uint8_t* bucket, const LutIndex& ix, double a) {
  const uint32_t hi = static_cast<uint32_t>(scalar::double_bits(a) >> 32);
  return bucket[bucket_index(static_cast<int>(hi >> (20 - ix.sub_bits)),
                             (1022 + ix.emin) << ix.sub_bits, ix)];
}

// Interval of a non-negative scaled magnitude a: the number of midpoints at or below it.
CS_HD int interval_of(const double* thr, const uint8_t* bucket, const LutIndex& ix, double a) {
  int k = interval_base(bucket, ix, a);
  for (int s = 0; s < ix.max_steps && k < ix.nthr && a >= thr[k]; ++s) ++k;
  return k;
}

// interval_of in exactly max_steps steps of `k += a >= thr_pad[k]`: once a threshold is above a,
// k stays.
inline int interval_steps(const Lut& t, double a) {
  int k = interval_base(t.bucket.data(), t.ix, a);
  for (int s = 0; s < t.ix.max_steps; ++s) k += a >= t.thr_pad[k];
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
