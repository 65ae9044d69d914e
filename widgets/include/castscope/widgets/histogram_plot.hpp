// Histogram plot: one or more binned series over the same bins, linear or log counts, with an
// optional shaded x range (the target's representable magnitudes on an exponent histogram).
#pragma once

#include <imgui.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace castscope::widgets {

struct HistSeries {
  std::string label;
  ImU32 color = 0;
  const std::vector<uint64_t>* counts = nullptr;
  bool filled = false;  // bars (first series) or a step outline (overlays)
};

struct HistPlotOptions {
  double x0 = 0, dx = 1;  // left edge of bin 0 and bin width
  bool log_y = false;
  double shade_lo = NAN, shade_hi = NAN;  // x range to shade (NaN: none)
  std::string shade_label;
  std::string x_label;
  bool x_is_log2 = false;  // bins over log2|x|: tooltips also print 2^x
};

void draw_histogram(const char* id, const std::vector<HistSeries>& series, const HistPlotOptions& o,
                    ImVec2 size);

}  // namespace castscope::widgets
