// Searched group scales. The grid search is llm-compressor's MSE observer (observers/mse.py):
// shrink factors p = 1 - i / grid for i < maxshrink * grid, each group's range scaled by p, the
// error sum |q - x|^norm of the group cast with that scale, the least kept; the search stops
// after `patience` (5) steps in which no group improved. Here the candidate scale is rounded to
// the scale's format and taken under the tensor scale, as the cast stores it (llm-compressor
// searches NVFP4's ranges without either). Four over six (NVFP4): each block takes the scale
// mapping its absmax onto 6 or onto 4, whichever gives the smaller squared error.
#include <cmath>

#include "methods/method.hpp"

namespace castscope::methods {
namespace {

double group_error(const ScaledQuantizer& q, const GroupScale& s, const std::vector<float>& v,
                   double norm) {
  double e = 0;
  for (float x : v)
    e += std::pow(std::fabs(q.round(s, x, 0, nullptr) - static_cast<double>(x)), norm);
  return e;
}

}  // namespace

MethodResult mse(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m) {
  const int64_t G = q.groups();
  std::vector<std::vector<float>> vals(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) gather_group(q, v.w.data(), g, vals[static_cast<size_t>(g)]);
  std::vector<GroupScale> best(static_cast<size_t>(G));
  if (m.four_over_six) {
    for (int64_t g = 0; g < G; ++g) {
      const auto& x = vals[static_cast<size_t>(g)];
      const GroupScale six = q.choose(x.data(), static_cast<int64_t>(x.size()));
      const GroupScale four = q.choose_to(x.data(), static_cast<int64_t>(x.size()), 6.0 / 4.0);
      best[static_cast<size_t>(g)] =
          group_error(q, four, x, 2.0) < group_error(q, six, x, 2.0) ? four : six;
    }
  } else {
    std::vector<double> err(static_cast<size_t>(G), HUGE_VAL);
    const int steps = static_cast<int>(m.maxshrink * m.grid);
    constexpr int kPatience = 5;
    int no_improve = 0;
    for (int i = 0; i < steps; ++i) {
      const double p = 1.0 - static_cast<double>(i) / m.grid;
      bool improved = false;
      for (int64_t g = 0; g < G; ++g) {
        const auto& x = vals[static_cast<size_t>(g)];
        const GroupScale s = q.choose(x.data(), static_cast<int64_t>(x.size()), p);
        const double e = group_error(q, s, x, m.norm);
        if (e < err[static_cast<size_t>(g)]) {
          err[static_cast<size_t>(g)] = e;
          best[static_cast<size_t>(g)] = s;
          improved = true;
        }
      }
      no_improve = improved ? 0 : no_improve + 1;
      if (no_improve >= kPatience) break;
    }
    if (steps <= 0) best = choose_scales(q, v.w.data());
  }
  MethodResult r;
  r.cast = q.result(v.shape, v.options, round_with(q, v.w.data(), best, nullptr), best);
  return r;
}

}  // namespace castscope::methods
