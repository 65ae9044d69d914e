#include "castscope/widgets/plot_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace castscope::widgets {

double nice_step(double span, int max_ticks) {
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  const double raw = span / std::max(1, max_ticks);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

std::string tick_label(double v, double step) {
  char buf[48];
  if (!std::isfinite(v) || !(step > 0) || !std::isfinite(step)) {
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  if (std::fabs(v) < step * 1e-6) return "0";
  // The exponent of the step's one significant digit decides how many digits a label needs.
  const int e = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  if (step >= 1e5 || e <= -4) {
    const int mag = static_cast<int>(std::floor(std::log10(std::fabs(v)) + 1e-9));
    std::snprintf(buf, sizeof buf, "%.*e", std::max(0, mag - e), v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -e), v);
  }
  return buf;
}

Ticks linear_ticks(double lo, double hi, int max_ticks) {
  Ticks t;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return t;
  t.step = nice_step(hi - lo, max_ticks);
  // A step that leaves fewer than three ticks inside the range (0.5 on [-0.49, 0.49]) gives way
  // to the next smaller nice step, as long as that stays within max_ticks.
  const int want = std::min(3, std::max(2, max_ticks));
  for (int n = max_ticks + 1; n <= 3 * std::max(2, max_ticks); ++n) {
    const double k0 = std::ceil(lo / t.step - 1e-9), k1 = std::floor(hi / t.step + 1e-9);
    if (k1 - k0 + 1 >= want) break;
    t.step = nice_step(hi - lo, n);
  }
  const double k0 = std::ceil(lo / t.step - 1e-9), k1 = std::floor(hi / t.step + 1e-9);
  // A range far narrower than its magnitude (1e20 .. 1e20 + 1) has no representable ticks.
  if (!(k1 - k0 < 1000) || k0 + 1 == k0) return Ticks{};
  for (double k = k0; k <= k1; ++k) {
    const double v = k * t.step;
    t.values.push_back(v);
    t.labels.push_back(tick_label(v, t.step));
  }
  return t;
}

std::string count_label(double c) {
  char buf[32];
  const double a = std::fabs(c);
  const char* unit = "";
  double d = 1;
  if (a >= 1e9)
    unit = "G", d = 1e9;
  else if (a >= 1e6)
    unit = "M", d = 1e6;
  else if (a >= 1e3)
    unit = "k", d = 1e3;
  const double s = c / d;
  if (std::fabs(s - std::round(s)) < 1e-9)
    std::snprintf(buf, sizeof buf, "%.0f%s", s, unit);
  else
    std::snprintf(buf, sizeof buf, "%.3g%s", s, unit);
  return buf;
}

Ticks log_count_ticks(double max_count, int max_ticks) {
  Ticks t;
  t.values.push_back(0);
  t.labels.push_back("0");
  if (!(max_count >= 1)) return t;
  const int decades = static_cast<int>(std::floor(std::log10(max_count) + 1e-9));
  const int stride =
      std::max(1, (decades + 1 + std::max(1, max_ticks - 1) - 1) / std::max(1, max_ticks - 1));
  for (int d = 0; d <= decades; d += stride) {
    const double v = std::pow(10.0, d);
    t.values.push_back(v);
    t.labels.push_back(count_label(v));
  }
  return t;
}

void axis_reset(AxisView& v) {
  v.lo = v.full_lo;
  v.hi = v.full_hi;
}

void axis_fit(AxisView& v, double full_lo, double full_hi) {
  if (v.full_lo == full_lo && v.full_hi == full_hi && v.hi > v.lo) return;
  v.full_lo = full_lo;
  v.full_hi = full_hi;
  axis_reset(v);
}

namespace {

// span: the width before the shift (recomputing it after a large shift would lose digits).
void axis_shift_inside(AxisView& v, double span) {
  v.hi = v.lo + span;
  if (v.lo < v.full_lo) v.lo = v.full_lo, v.hi = v.full_lo + span;
  if (v.hi > v.full_hi) v.hi = v.full_hi, v.lo = v.full_hi - span;
  v.lo = std::max(v.lo, v.full_lo);
}

}  // namespace

void axis_zoom(AxisView& v, double anchor, double factor) {
  const double full = v.full_hi - v.full_lo, span = v.hi - v.lo;
  if (!(full > 0) || !(span > 0) || !(factor > 0)) return;
  const double ns = std::clamp(span / factor, full / 4096, full);
  v.lo = anchor - (anchor - v.lo) * (ns / span);
  axis_shift_inside(v, ns);
}

void axis_pan(AxisView& v, double dx) {
  const double span = v.hi - v.lo;
  v.lo += dx;
  axis_shift_inside(v, span);
}

double grid_max_zoom_x(const GridGeom& g) {
  if (g.width <= 0 || g.cols <= 0) return 1;
  return std::max(1.0, kElementPx * static_cast<double>(g.cols * g.cell_cols) / g.width);
}

double grid_max_zoom_y(const GridGeom& g) {
  if (g.height <= 0 || g.rows <= 0) return 1;
  return std::max(1.0, kElementPx * static_cast<double>(g.rows * g.cell_rows) / g.height);
}

void grid_clamp(GridView& v, const GridGeom& g) {
  v.zx = std::clamp(v.zx, 1.0, grid_max_zoom_x(g));
  v.zy = std::clamp(v.zy, 1.0, grid_max_zoom_y(g));
  v.u0 = std::clamp(v.u0, 0.0, 1.0 - 1.0 / v.zx);
  v.v0 = std::clamp(v.v0, 0.0, 1.0 - 1.0 / v.zy);
}

void grid_to_cells(const GridView& v, const GridGeom& g, float px, float py, double* col,
                   double* row) {
  const double u = v.u0 + px / std::max(1e-6f, g.width) / v.zx;
  const double w = v.v0 + py / std::max(1e-6f, g.height) / v.zy;
  *col = u * static_cast<double>(g.cols);
  *row = w * static_cast<double>(g.rows);
}

void grid_to_pixels(const GridView& v, const GridGeom& g, double col, double row, float* px,
                    float* py) {
  *px = static_cast<float>((col / std::max<int64_t>(1, g.cols) - v.u0) * v.zx * g.width);
  *py = static_cast<float>((row / std::max<int64_t>(1, g.rows) - v.v0) * v.zy * g.height);
}

void grid_zoom(GridView& v, const GridGeom& g, float px, float py, double factor) {
  double col, row;
  grid_to_cells(v, g, px, py, &col, &row);
  v.zx = std::clamp(v.zx * factor, 1.0, grid_max_zoom_x(g));
  v.zy = std::clamp(v.zy * factor, 1.0, grid_max_zoom_y(g));
  // Keep the point under the mouse where it was.
  v.u0 = col / std::max<int64_t>(1, g.cols) - px / std::max(1e-6f, g.width) / v.zx;
  v.v0 = row / std::max<int64_t>(1, g.rows) - py / std::max(1e-6f, g.height) / v.zy;
  grid_clamp(v, g);
}

void grid_pan(GridView& v, const GridGeom& g, float dx, float dy) {
  v.u0 -= dx / std::max(1e-6f, g.width) / v.zx;
  v.v0 -= dy / std::max(1e-6f, g.height) / v.zy;
  grid_clamp(v, g);
}

std::optional<GridHit> grid_hit(const GridView& v, const GridGeom& g, float px, float py) {
  if (g.rows <= 0 || g.cols <= 0 || px < 0 || py < 0 || px >= g.width || py >= g.height)
    return std::nullopt;
  double col, row;
  grid_to_cells(v, g, px, py, &col, &row);
  GridHit h;
  h.col = std::clamp<int64_t>(static_cast<int64_t>(std::floor(col)), 0, g.cols - 1);
  h.row = std::clamp<int64_t>(static_cast<int64_t>(std::floor(row)), 0, g.rows - 1);
  const int64_t ec = static_cast<int64_t>(std::floor(col * static_cast<double>(g.cell_cols)));
  const int64_t er = static_cast<int64_t>(std::floor(row * static_cast<double>(g.cell_rows)));
  // The last cells may reach past the elements (a partial tile): the tile is still there to
  // hover and click, but no element (-1).
  const bool past = ec >= g.elem_cols || er >= g.elem_rows;
  h.elem_col = past ? -1 : std::max<int64_t>(0, ec);
  h.elem_row = past ? -1 : std::max<int64_t>(0, er);
  return h;
}

double grid_element_px_x(const GridView& v, const GridGeom& g) {
  return g.width * v.zx / std::max<double>(1, static_cast<double>(g.cols * g.cell_cols));
}

double grid_element_px_y(const GridView& v, const GridGeom& g) {
  return g.height * v.zy / std::max<double>(1, static_cast<double>(g.rows * g.cell_rows));
}

}  // namespace castscope::widgets
