#include "codebook/cb_lut.hpp"

#include <algorithm>
#include <cmath>

namespace castscope::detail::cb {

Lut build_lut(const Params& p) {
  Lut l;
  l.nmaps = p.nmaps;
  if (p.nmaps < 1 || p.nmaps > 16) {
    l.why = "more than 16 mappings";
    return l;
  }
  l.width = p.nmaps <= 2 ? 2 : p.nmaps <= 4 ? 4 : p.nmaps <= 8 ? 8 : 16;
  l.row_groups = l.width == 16 ? 2 : 1;
  // The thresholds exactly as nearest_slot computes them.
  for (int m = 0; m < p.nmaps; ++m) {
    const double* mag = p.mags + m * p.half;
    double prev = 0;
    for (int j = 1; j < p.half; ++j) {
      const double v = mag[j];
      if (!(v > 0)) continue;
      l.thr.push_back((prev + v) * 0.5);
      prev = v;
    }
  }
  std::sort(l.thr.begin(), l.thr.end());
  l.thr.erase(std::unique(l.thr.begin(), l.thr.end()), l.thr.end());
  l.nthr = static_cast<int>(l.thr.size());
  if (l.nthr > 255) {
    l.why = "more than 255 distinct midpoints";
    return l;
  }
  const int rows = l.nthr + 1;
  l.slot.assign(static_cast<size_t>(rows) * l.width, 0);
  l.hi16.assign(static_cast<size_t>(rows) * l.row_groups * 8, 0);
  for (int k = 0; k < rows; ++k) {
    // Every threshold is positive; the largest one at or below the interval's start stands for
    // the whole interval.
    const double rep = k == 0 ? 0.0 : l.thr[k - 1];
    for (int m = 0; m < p.nmaps; ++m) {
      const double* mag = p.mags + m * p.half;
      const int j = nearest_slot(mag, p.half, rep);
      const uint64_t bits = scalar::double_bits(mag[j]);
      if (bits & 0xFFFFFFFFFFFFull) {
        l.why = "a magnitude with more than 5 significant bits";
        return l;
      }
      l.slot[static_cast<size_t>(k) * l.width + m] = static_cast<uint8_t>(j);
      l.hi16[static_cast<size_t>(k) * l.row_groups * 8 + m] = static_cast<uint16_t>(bits >> 48);
    }
  }
  l.emin = l.nthr ? std::ilogb(l.thr[0]) : 0;
  l.bucket.assign(kBuckets, 0);
  for (int b = 1; b < kBuckets; ++b) {
    const double low = std::ldexp(1.0 + (b & 7) / 8.0, l.emin + (b >> 3));
    l.bucket[b] =
        static_cast<uint8_t>(std::upper_bound(l.thr.begin(), l.thr.end(), low) - l.thr.begin());
  }
  l.ok = true;
  return l;
}

}  // namespace castscope::detail::cb
