// The views' host path (widgets::analyze with the views on the CPU): two fused passes over a
// tensor and its cast. Internal to the analysis library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "castscope/metrics.hpp"
#include "castscope/widgets/analysis.hpp"
#include "core/parallel.hpp"

namespace castscope::widgets {

struct InputViews {
  double absmax = 0;
  ExponentHistogram eo;
  Histogram value, log;  // value_orig and log_orig, each over the range it records
};

// A tiled cast's sparsity mask (host or device tensor), when it has one per element.
template <class T>
bool sparsity_mask(bool tiled, const T& mask, int64_t n) {
  return tiled && mask && mask.numel() == n && mask.dtype() == DType::Bool;
}

// Per-cell counts of a mask image: the elements of the view v whose storage index i has on(i).
// A cell row per task, each walking its view rows along the reduction axis (a stride of
// v.inner in storage), so the counts do not depend on the thread count.
template <class On>
std::vector<int64_t> mask_cells(const MaskImage& m, const View2D& v, On&& on) {
  std::vector<int64_t> hits(static_cast<size_t>(m.out_rows * m.out_cols), 0);
  detail::parallel_for(m.out_rows, 1, 0, nullptr, [&](int64_t b, int64_t e) {
    for (int64_t cr = b; cr < e; ++cr) {
      int64_t* row = hits.data() + cr * m.out_cols;
      for (int64_t r = cr * m.cell_rows; r < std::min(m.rows, (cr + 1) * m.cell_rows); ++r) {
        const int64_t base = (r / v.inner) * v.cols * v.inner + r % v.inner;
        for (int64_t c = 0; c < m.cols; ++c) row[c / m.cell_cols] += on(base + c * v.inner);
      }
    }
  });
  return hits;
}

// What the first pass over the data gives: the statistics, the input's absmax, both exponent
// histograms and the mask image's per-cell counts.
struct FirstPass {
  Stats stats;
  double absmax = 0;
  ExponentHistogram eo, ec;
  std::vector<int64_t> cells;
};
// The second pass: histograms whose ranges the first one fixed.
struct SecondPass {
  Histogram vo, vc, lo, lc, err;
};
struct Ranges {
  double lim = 1, lo = 0, hi = 1, elim = 1;
  int bins = 8;
};

// The views' inputs on the host: the float32 input, its cast values and the cast result. Every
// view comes from two passes over the input and its cast, split over the threads in chunks whose
// partial results are merged in chunk order, so the sums do not depend on the thread count.
struct HostViews {
  Tensor x, q;
  CastResult r;
  bool tiled = false;
  View2D view;  // the mask's grid: cells counted in the chunks when it is the storage order
  // The input's own views from an earlier analysis of the same tensor: the passes skip them.
  const InputViews* known = nullptr;
  int64_t n() const { return x.numel(); }
  static constexpr int64_t kChunk = 1 << 16;
  int64_t chunks() const { return (n() + kChunk - 1) / kChunk; }
  // Statistics, absmax, exponent histograms and the mask's per-cell counts.
  FirstPass first(const MaskImage& m, JobControl* job) const;
  // The value, log and error histograms over the ranges the first pass fixed.
  SecondPass second(const Ranges& g, JobControl* job) const;
  // The tile map: from the second pass when its tiles are runs of the storage (fused_tiles),
  // else tile_map()'s own pass.
  TileMap tiles() const { return fused ? std::move(*fused) : tile_map(x, q, r); }
  mutable std::optional<TileMap> fused;
  bool has_mask() const { return sparsity_mask(tiled, r.mask, n()); }
};

}  // namespace castscope::widgets
