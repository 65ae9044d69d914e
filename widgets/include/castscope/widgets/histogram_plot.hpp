// Histogram plot: one or more binned series with labelled x and count axes (linear or log
// counts), an optional shaded x range (the target's representable magnitudes on an exponent
// histogram), a legend above the data, and zoom (mouse wheel) / pan (drag) on x; a double click
// shows the whole range again.
#pragma once

#include <imgui.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "castscope/widgets/plot_math.hpp"

namespace castscope::widgets {

struct HistSeries {
  std::string label;
  ImU32 color = 0;
  const std::vector<uint64_t>* counts = nullptr;
  bool filled = false;  // bars (first series) or a step outline (overlays)
  double x0 = NAN;      // left edge of this series' bin 0 when it differs from the plot's
  bool dashed = false;  // a second datatype's overlay
};

struct HistPlotOptions {
  double x0 = 0, dx = 1;  // left edge of bin 0 and bin width
  bool log_y = false;
  double shade_lo = NAN, shade_hi = NAN;  // x range to shade (NaN: none)
  std::string shade_label;
  std::string shade_note;  // tooltip of the shade's legend entry
  std::string x_label;
  bool x_is_log2 = false;    // bins over log2|x|: tooltips also print 2^x
  AxisView* view = nullptr;  // zoom / pan state (null: fixed to the data's range)
};

void draw_histogram(const char* id, const std::vector<HistSeries>& series, const HistPlotOptions& o,
                    ImVec2 size);

// The x range a histogram spans: [x0 + dx * first bin, x0 + dx * bins) over all series.
void histogram_extent(const std::vector<HistSeries>& series, const HistPlotOptions& o, double* lo,
                      double* hi);

}  // namespace castscope::widgets
