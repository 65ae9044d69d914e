// The arithmetic behind the plots and image views, apart from any drawing (no ImGui, no GL) so
// that tests check it directly: "nice" axis ticks and their labels, a zoomable x range for the
// histograms, and the zoom / pan / hit-test transform that places a grid of cells (tiles, mask
// cells) in a panel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castscope::widgets {

struct Ticks {
  double step = 0;  // distance between ticks (linear axes); 0 for log axes
  std::vector<double> values;
  std::vector<std::string> labels;
};

// The smallest step of the form {1, 2, 5} x 10^k that splits `span` into at most max_ticks steps.
double nice_step(double span, int max_ticks);
// A tick's label, with as many digits as the step needs: 0 reads "0" (never 1e-17), 0.25 with a
// step of 0.05 reads "0.25", 3e-5 with a step of 1e-5 reads "3e-05".
std::string tick_label(double v, double step);
// Ticks at whole multiples of a nice step inside [lo, hi]. Each value is k * step computed from
// the integer k, so the tick at the centre of a symmetric range is exactly 0.
Ticks linear_ticks(double lo, double hi, int max_ticks);
// A count axis on log10(1 + count): 0, 1, 10, 100, ... up to max_count, every second (third...)
// decade when there would be more than max_ticks.
Ticks log_count_ticks(double max_count, int max_ticks);
// Counts in short form: 950, 12k, 3.5M.
std::string count_label(double c);

// A visible x range inside the data's full range [full_lo, full_hi] (histogram zoom and pan).
struct AxisView {
  double lo = 0, hi = 0;
  double full_lo = 0, full_hi = 0;
  // Where the plot's data area was drawn last frame (screen pixels), for scripted mouse tests.
  float screen[4] = {0, 0, 0, 0};  // x, y, width, height
  bool zoomed() const { return lo > full_lo || hi < full_hi; }
};
// Shows the full range; keeps the zoom when the full range is unchanged.
void axis_fit(AxisView& v, double full_lo, double full_hi);
void axis_reset(AxisView& v);
// factor > 1 zooms in around x = anchor (which stays where it is on screen); the visible span
// never drops below 1/4096 of the full span and never exceeds it.
void axis_zoom(AxisView& v, double anchor, double factor);
// Shifts the range by dx (data units), stopping at the full range's ends.
void axis_pan(AxisView& v, double dx);

// A grid of rows x cols cells, each cell_rows x cell_cols elements of a 2-D extent of
// elem_rows x elem_cols (the last row / column of cells may hold fewer), shown in a panel of
// width x height pixels. At zoom 1 the grid fills the panel whatever its shape: each axis is
// stretched on its own, so a [120, 6625] tensor at 1 x 32 tiles fills the panel instead of
// becoming a strip. The zoom is per axis, and the mouse wheel multiplies both until each axis
// reaches its element level (one element max_element_px wide or tall): a long thin grid ends
// up with square-ish elements.
struct GridGeom {
  int64_t rows = 0, cols = 0;
  int64_t cell_rows = 1, cell_cols = 1;
  int64_t elem_rows = 0, elem_cols = 0;
  float width = 0, height = 0;
};
struct GridView {
  double zx = 1, zy = 1;  // zoom per axis (>= 1)
  double u0 = 0, v0 = 0;  // top-left of the visible window, fractions of the grid [0, 1]
};
constexpr double kElementPx = 32;  // an element's size in pixels at the deepest zoom
// The deepest zoom of each axis.
double grid_max_zoom_x(const GridGeom& g);
double grid_max_zoom_y(const GridGeom& g);
// Zooms by factor around the panel point (px, py), which stays over the same spot of the grid.
void grid_zoom(GridView& v, const GridGeom& g, float px, float py, double factor);
// Moves the view by a drag of (dx, dy) pixels: the grid follows the mouse.
void grid_pan(GridView& v, const GridGeom& g, float dx, float dy);
void grid_clamp(GridView& v, const GridGeom& g);
// Panel pixel -> grid coordinates in cells (fractional); and back.
void grid_to_cells(const GridView& v, const GridGeom& g, float px, float py, double* col,
                   double* row);
void grid_to_pixels(const GridView& v, const GridGeom& g, double col, double row, float* px,
                    float* py);
struct GridHit {
  int64_t row = 0, col = 0;            // cell
  int64_t elem_row = 0, elem_col = 0;  // element under the point
};
// The cell and element under a panel pixel; nothing outside the panel or past the elements.
std::optional<GridHit> grid_hit(const GridView& v, const GridGeom& g, float px, float py);
// Pixels per element on each axis at the current zoom.
double grid_element_px_x(const GridView& v, const GridGeom& g);
double grid_element_px_y(const GridView& v, const GridGeom& g);

}  // namespace castscope::widgets
