#include <imgui.h>

#include "app_state.hpp"

namespace castscope::gui {

void set_theme(AppState& app, bool dark) {
  app.dark = dark;
  ImGuiStyle style;
  if (dark)
    ImGui::StyleColorsDark(&style);
  else
    ImGui::StyleColorsLight(&style);
  style.WindowRounding = 4.0f;
  style.FrameRounding = 3.0f;
  style.GrabRounding = 3.0f;
  style.WindowPadding = ImVec2(8, 8);
  style.FramePadding = ImVec2(6, 3);
  style.ItemSpacing = ImVec2(8, 5);
  if (!dark) {
    style.Colors[ImGuiCol_WindowBg] = ImVec4(0.96f, 0.96f, 0.97f, 1.0f);
    style.Colors[ImGuiCol_FrameBg] = ImVec4(0.88f, 0.89f, 0.92f, 1.0f);
  }
  // Opaque panels: overlapping windows must not show each other's text through.
  style.Colors[ImGuiCol_WindowBg].w = 1.0f;
  style.ScaleAllSizes(app.dpi_scale);
  ImGui::GetStyle() = style;
}

}  // namespace castscope::gui
