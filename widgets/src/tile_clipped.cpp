#include "castscope/widgets/tile_clipped.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "castscope/scalar.hpp"
#include "castscope/widgets/analysis.hpp"

namespace castscope::widgets {

namespace {
// The grid the cast quantizes scaled elements on (core/plan.cpp picks it the same way).
scalar::Format clip_grid(const DataType& d) {
  const NumberSpec& f = d.number();
  const bool int_grid =
      d.scaled() && ((f.is_int() && !d.scale()->scale.is_exponent()) || f.is_uint());
  return int_grid ? f.integer_grid() : f.format();
}
}  // namespace

bool clips_after_rounding(const DataType& d, Round round, double xs) {
  if (!std::isfinite(xs)) return false;
  // Stochastic rounding clips by chance; nearest is what the view can say.
  const Round r = round == Round::Stochastic ? Round::Even : round;
  return scalar::quantize(xs, clip_grid(d), r, scalar::Overflow::Saturate, 0).clipped;
}

double clip_grid_max(const DataType& d) {
  const scalar::Format g = clip_grid(d);
  return std::ldexp(static_cast<double>(g.maxr), g.maxe);
}

std::vector<int64_t> tile_clipped(const Tensor& x, const View2D& view, const TileMap& m,
                                  const CastResult& r, std::string* why) {
  auto fail = [&](const char* w) {
    *why = w;
    return std::vector<int64_t>();
  };
  const DataType& d = r.dtype;
  const CastOptions& o = r.options;
  if (!family_traits(d.family()).grammar || d.has_zero_point() || d.subtile())
    return fail("counted for plain tile-scaled datatypes only");
  if (o.round == Round::Stochastic) return fail("not counted under stochastic rounding");
  if (o.overflow != Overflow::Saturate) return fail("counted for saturating casts only");
  if (x.dtype() != DType::F32) return fail("needs the float32 input");
  const int64_t R = view.rows, C = view.cols;
  // The tiles must lie on the tensor's 2-D view [outputs, reduction].
  if (m.cols * m.tile_cols < C || (m.cols - 1) * m.tile_cols >= C ||
      !(m.tile_rows == 1 ? m.rows == R : m.rows * m.tile_rows == R))
    return fail("the tiles do not lie on the tensor's 2-D view");
  double t = 1.0;
  if (d.multiscale()) {
    if (!r.tenscale || r.tenscale.dtype() != DType::F32 || r.tenscale.numel() != 1)
      return fail("not counted for this two-level scale");
    t = r.tenscale.ptr<float>()[0];
  }
  // Past midmax the value rounds up beyond the largest one (round to nearest); round toward
  // zero clips only at a whole quantum beyond it.
  const NumberSpec& f = d.number();
  double limit = f.midmax();
  if (o.round == Round::Zero) limit = f.max() + 2 * (f.midmax() - f.max());
  std::vector<int64_t> out(static_cast<size_t>(m.rows * m.cols), 0);
  const float* xp = x.ptr<float>();
  int64_t total = 0;
  for (int64_t ti = 0; ti < m.rows; ++ti)
    for (int64_t tj = 0; tj < m.cols; ++tj) {
      const size_t k = static_cast<size_t>(ti * m.cols + tj);
      const double s = static_cast<double>(m.scale_value[k]) * t;
      // Most tiles clip nothing: their absmax (over finite inputs) already says so (a value at
      // exactly the limit may round up, so the limit itself is tested exactly).
      if (!(s > 0) || !(static_cast<double>(m.absmax[k]) / s >= limit * (1 - 1e-9))) continue;
      // A cheap comparison rules out most elements; the exact test decides the rest.
      const double near = limit * s * (1 - 1e-9);
      const int64_t i0 = ti * m.tile_rows, j0 = tj * m.tile_cols;
      const int64_t i1 = std::min(R, i0 + m.tile_rows), j1 = std::min(C, j0 + m.tile_cols);
      int64_t n = 0;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const double a = std::fabs(static_cast<double>(xp[view.at(i, j)]));
          if (a > near) n += clips_after_rounding(d, o.round, a / s);
        }
      out[k] = n;
      total += n;
    }
  if (total != r.counts.clipped)
    return fail("the per-tile count did not reproduce the cast's total; not shown");
  return out;
}

}  // namespace castscope::widgets
