// Random and adversarial float32 inputs for scaled casts: exact ties of the element grid at the
// tile's scale, subnormals, values at the max and midmax boundaries, huge, tiny, signed zeros
// and (optionally) NaN / Inf.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "oracle.hpp"

namespace oracle {

// Non-negative finite values of the element grid in units of the tile scale.
inline std::vector<double> element_grid(const castscope::NumberSpec& n) {
  std::vector<double> g;
  if (n.is_int()) {
    for (int64_t q = 0; q <= n.int_max() && q < 4096; ++q)
      g.push_back(std::ldexp(double(q), 2 - n.bits()));
    return g;
  }
  if (n.bits() <= 8) {
    for (const auto& c : n.enumerate())
      if (std::isfinite(c.value) && c.value >= 0 && !std::signbit(c.value)) g.push_back(c.value);
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    return g;
  }
  for (int i = 0; i < 64; ++i) g.push_back(n.max() * std::ldexp(1.0, -i));
  g.push_back(0);
  std::sort(g.begin(), g.end());
  return g;
}

// Fills a tensor of `count` values, tile by tile of `tile` consecutive values (the caller lays
// them out along the tile axis), so that many tiles hold exact ties at their own scale.
inline std::vector<float> adversarial(const castscope::NumberSpec& n, int64_t count, int tile,
                                      bool nonfinite, std::mt19937_64& rng) {
  const std::vector<double> grid = element_grid(n);
  std::vector<float> x(count);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  std::normal_distribution<double> normal(0, 1);
  const double top = grid.back();
  for (int64_t base = 0; base < count; base += tile) {
    const int kind = pick(rng) % 8;
    const int s = pick(rng) % 41 - 20;
    const double sc = std::ldexp(1.0, s);
    for (int64_t i = base; i < std::min(count, base + tile); ++i) {
      const int r = pick(rng);
      const double sign = (r & 1) ? -1.0 : 1.0;
      double v;
      const size_t k = static_cast<size_t>(r >> 1) % (grid.size() - 1);
      switch (kind) {
        case 0:  // plain random
          v = normal(rng) * std::ldexp(1.0, pick(rng) % 9 - 4);
          break;
        case 1:  // exact midpoints of the element grid at this tile's scale
        case 2:
          v = (grid[k] + grid[k + 1]) / 2 * sc;
          break;
        case 3:  // representable values
          v = grid[k] * sc;
          break;
        case 4:  // the top of the range: max, midmax, their neighbours, the overflow tie
        {
          const double cands[] = {top,
                                  n.midmax(),
                                  std::nextafter(float(n.midmax()), 0.f),
                                  std::nextafter(float(n.midmax()), 1e30f),
                                  (top + grid[grid.size() - 2]) / 2,
                                  top * 1.0625,
                                  std::nextafter(float(top), 1e30f),
                                  std::ldexp(1.0, n.emax() + 1)};
          v = cands[r % 8] * sc;
          break;
        }
        case 5:  // subnormal and tiny float32 values
          v = std::ldexp(1.0 + (r % 8) / 8.0, -(r % 30) - 120);
          break;
        case 6:  // huge
          v = std::ldexp(1.0 + (r % 16) / 16.0, 100 + r % 28);
          break;
        default:  // zeros mixed with one value
          v = (i == base) ? grid[k] * sc : 0.0;
          break;
      }
      x[i] = static_cast<float>(sign * v);
    }
  }
  if (nonfinite) {
    for (int k = 0; k < 3 && count > 40; ++k) {
      const int64_t i = pick(rng) % count;
      x[i] = k == 0 ? NAN : (k == 1 ? INFINITY : -INFINITY);
    }
  }
  return x;
}

}  // namespace oracle
