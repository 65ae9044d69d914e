#include "plot_frame.hpp"

#include <algorithm>

namespace castscope::widgets {

PlotFrame begin_plot(const char* id, ImVec2 size, float min_height, bool default_height) {
  ImGui::PushID(id);
  PlotFrame f;
  f.dl = ImGui::GetWindowDrawList();
  f.p0 = ImGui::GetCursorScreenPos();
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (default_height && size.y <= 0) size.y = ImGui::GetFontSize() * 10;
  size.x = std::max(size.x, 80.0f);
  size.y = std::max(size.y, min_height);
  f.size = size;
  ImGui::InvisibleButton("plot", size);
  f.hovered = ImGui::IsItemHovered();
  f.active = ImGui::IsItemActive();
  f.fs = ImGui::GetFontSize();
  f.dl->AddRectFilled(f.p0, ImVec2(f.p0.x + size.x, f.p0.y + size.y),
                      ImGui::GetColorU32(ImGuiCol_FrameBg), 3.0f);
  return f;
}

bool set_plot_area(AxisView& view, ImVec2 a, ImVec2 b, float fs) {
  if (b.y - a.y < fs || b.x - a.x < fs * 2) return false;
  view.screen[0] = a.x;
  view.screen[1] = a.y;
  view.screen[2] = b.x - a.x;
  view.screen[3] = b.y - a.y;
  return true;
}

}  // namespace castscope::widgets
