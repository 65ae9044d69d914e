// Line plot of one series over its index (a value per output channel, ...), with labelled axes
// at nice steps, zoom (mouse wheel) / pan (drag) on x and a double click for the whole range.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "castscope/widgets/plot_math.hpp"

namespace castscope::widgets {

struct LinePlotOptions {
  std::string x_label, y_label;
  ImU32 color = IM_COL32(245, 150, 40, 255);
  AxisView* view = nullptr;  // zoom / pan state (null: fixed to the whole series)
};

void draw_line_plot(const char* id, const std::vector<float>& y, const LinePlotOptions& o,
                    ImVec2 size);

}  // namespace castscope::widgets
