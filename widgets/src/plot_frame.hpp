// What every plot widget starts with and how it fixes its drawing area, shared by the histogram,
// line and Pareto plots.
#pragma once

#include <imgui.h>

#include "castscope/widgets/plot_math.hpp"

namespace castscope::widgets {

struct PlotFrame {
  ImDrawList* dl;
  ImVec2 p0, size;  // top-left corner and size on screen
  bool hovered, active;
  float fs;  // font size
};

// Pushes `id`, settles the size (the available width when size.x <= 0, ten lines high when
// size.y <= 0 and default_height, at least 80 x min_height), takes the mouse with an invisible
// button and draws the background. The caller pops the ID.
PlotFrame begin_plot(const char* id, ImVec2 size, float min_height, bool default_height = true);

// Records the plot area [a, b] in the view, where the mouse handling maps pixels to values;
// false when it is too small to draw in.
bool set_plot_area(AxisView& view, ImVec2 a, ImVec2 b, float fs);

}  // namespace castscope::widgets
