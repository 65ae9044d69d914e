#include <imgui.h>

#include <filesystem>

#include <cstdio>

#include "panels.hpp"

namespace castscope::gui {

bool begin_panel(AppState& app, PanelId id, const char* title, float x, float y, float w, float h,
                 ImGuiWindowFlags flags) {
  const int i = static_cast<int>(id);
  if (!app.show[i]) return false;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float top = ImGui::GetFrameHeight();         // menu bar
  const float bottom = ImGui::GetFrameHeight() + 6;  // status bar
  const float H = vp->WorkSize.y - bottom - top + ImGui::GetFrameHeight();
  const ImGuiCond cond = app.opt.script.empty() ? ImGuiCond_FirstUseEver : ImGuiCond_Appearing;
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + x * vp->WorkSize.x, vp->WorkPos.y + y * H), cond);
  ImGui::SetNextWindowSize(ImVec2(w * vp->WorkSize.x, h * H), cond);
  if (app.focus_panel == i) {
    ImGui::SetNextWindowFocus();
    ImGui::SetNextWindowCollapsed(false);
    app.focus_panel = -1;
  }
  const bool open = ImGui::Begin(title, &app.show[i], flags);
  const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
  app.panel_rect[i] = ImVec4(p.x, p.y, s.x, s.y);
  if (!open) ImGui::End();
  return open;
}

void save_view_button(AppState& app, PanelId id) {
  if (ImGui::SmallButton("Save PNG")) {
    app.view_shot_panel = static_cast<int>(id);
    app.view_shot_rect = ImVec4();  // the whole panel
    app.view_shot_path = std::string("castscope-") + panel_name(id) + ".png";
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Save this panel as castscope-%s.png in the working directory",
                      panel_name(id));
}

std::string fit_text(const std::string& s, float width) {
  if (ImGui::CalcTextSize(s.c_str()).x <= width) return s;
  const char* dots = "...";
  // Keep more of the end: a tensor's last parts (q_proj.weight) tell tensors of a layer apart.
  size_t keep = s.size();
  while (keep > 0) {
    --keep;
    const size_t head = keep / 3, tail = keep - head;
    const std::string t = s.substr(0, head) + dots + s.substr(s.size() - tail);
    if (ImGui::CalcTextSize(t.c_str()).x <= width) return t;
  }
  return dots;
}

void name_text(const std::string& s, float width) {
  if (width <= 0) width = ImGui::GetContentRegionAvail().x;
  const std::string shown = fit_text(s, width);
  ImGui::TextUnformatted(shown.c_str());
  if (shown != s && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.c_str());
}

void error_text(const std::string& s) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.45f, 0.35f, 1));
  ImGui::TextWrapped("%s", s.c_str());
  ImGui::PopStyleColor();
}

std::string model_relative(const AppState& app, const std::string& file) {
  if (file.empty() || app.model_path.empty() || app.model_path == "demo") return file;
  std::error_code ec;
  std::filesystem::path base = app.model_path;
  if (!std::filesystem::is_directory(base, ec)) base = base.parent_path();
  const std::filesystem::path f = std::filesystem::path(file).lexically_normal();
  const std::filesystem::path rel = f.lexically_relative(base.lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return file;
  return rel.string();
}

std::string human_bytes(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
  return buf;
}

}  // namespace castscope::gui
