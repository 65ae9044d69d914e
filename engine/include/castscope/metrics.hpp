// What the views show, computed by the engine (never inside a GUI frame): error statistics,
// histograms, and per-tile scale maps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope {

// Error statistics over the finite inputs; non-finite inputs are counted, not folded in.
struct Stats {
  int64_t count = 0;          // elements compared (finite inputs)
  int64_t nonfinite_in = 0;   // NaN / Inf in the input
  int64_t nonfinite_out = 0;  // NaN / Inf produced from finite inputs
  int64_t clipped = 0;        // saturated finite inputs (from the cast)
  int64_t zeros_out = 0;      // finite non-zero inputs that became zero
  double mse = 0;
  double snr_db = 0;  // 10 log10(sum x^2 / sum (x - q)^2); +inf when exact
  double max_abs_err = 0;
  double mean_err = 0;      // signed mean of (q - x): the bias
  double signal_power = 0;  // mean x^2
  double clipped_pct() const { return count ? 100.0 * clipped / count : 0.0; }
};

// original: the input tensor (any float dtype); values: float32 of the same element count.
Stats compute_stats(const Tensor& original, const Tensor& values, int64_t clipped = 0);
// One-line and JSON renderings shared by the CLI and exports.
std::string stats_line(const Stats& s);

struct Histogram {
  double lo = 0, hi = 0;  // bin edges lo..hi (linear), or log2 edges when log_x
  bool log_x = false;     // bins over log2|x| instead of x
  std::vector<uint64_t> counts;
  uint64_t below = 0, above = 0, nonfinite = 0, zeros = 0;  // zeros: only counted when log_x
  double bin_width() const { return counts.empty() ? 0 : (hi - lo) / counts.size(); }
};

// Histogram of the finite values of a float32 array into `bins` equal bins over [lo, hi].
Histogram histogram(const float* v, int64_t n, double lo, double hi, int bins, bool log_x = false);
// Histogram of (q - x) over the finite inputs.
Histogram error_histogram(const float* x, const float* q, int64_t n, double lo, double hi,
                          int bins);
// Counts of floor(log2|x|) for finite non-zero x, one bin per binade from emin to emax.
struct ExponentHistogram {
  int emin = 0, emax = 0;
  std::vector<uint64_t> counts;  // counts[e - emin]
  uint64_t zeros = 0, nonfinite = 0;
};
ExponentHistogram exponent_histogram(const float* v, int64_t n);
// Narrows h.counts to the occupied binades (emin / emax follow), as exponent_histogram() gives
// them: views need not skip hundreds of empty binades. Every pass that counts binades ends here.
void trim_exponents(ExponentHistogram& h);
// A histogram from the counts a pass made: `bins` bins, then below, above, non-finite and zero
// (uint64_t or the device's unsigned long long).
template <class Count>
Histogram histogram_from_counts(const Count* c, double lo, double hi, int bins, bool log_x) {
  Histogram h;
  h.lo = lo;
  h.hi = hi;
  h.log_x = log_x;
  h.counts.assign(c, c + bins);
  h.below = c[bins];
  h.above = c[bins + 1];
  h.nonfinite = c[bins + 2];
  h.zeros = c[bins + 3];
  return h;
}

// Per-tile view of a scaled cast, laid out as a 2-D grid (rows x cols) of tiles: for a tensor
// [.., R, C] with tiles along the last axis, rows = product of the leading dims, cols = ceil(C/T).
struct TileMap {
  int64_t rows = 0, cols = 0;
  int64_t tile_rows = 1, tile_cols = 1;  // elements per tile in each direction
  std::vector<uint32_t> scale_code;      // raw code of each tile's scale
  std::vector<float> scale_value;        // decoded scale (NaN for a NaN scale)
  std::vector<float> absmax;             // tile absmax over finite inputs
  std::vector<float> snr_db;             // tile SNR (+inf when exact)
  // Codebooks: the mapping chosen by each subtile (subs_per_tile per tile, tile order), and per
  // tile the one most of its subtiles chose (the lowest on a tie). Empty for other datatypes.
  int subs_per_tile = 0;
  std::vector<uint8_t> sub_mapping;
  std::vector<int16_t> mapping;
};
// Needs an Actual or Compress result of a tile- or channel-scaled datatype with a 2-D view of
// the input (x as float32, same shape as result.shape). Throws Error otherwise.
TileMap tile_map(const Tensor& x_f32, const Tensor& values, const CastResult& actual);

}  // namespace castscope
