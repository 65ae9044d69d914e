// Menu bar and status bar: the app-wide commands and the job / frame-rate line.
#include <imgui.h>

#include <algorithm>

#include "demo_assets.hpp"
#include "panels.hpp"

namespace castscope::gui {

void draw_menu_bar(AppState& app) {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open...", "Ctrl+O")) {
      app.show[static_cast<int>(PanelId::Files)] = true;
      app.focus_panel = static_cast<int>(PanelId::Files);
      app.focus_open_path = true;
    }
    if (ImGui::BeginMenu("Open demo", !app.loader.running())) {
      for (const EmbeddedFile& f : embedded_demo_files())
        if (ImGui::MenuItem(f.name)) open_source(app, std::string("demo:") + f.name);
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Recent", !app.recent.empty() && !app.loader.running())) {
      for (const std::string& r : app.recent)
        if (ImGui::MenuItem(r.c_str())) {
          const std::string copy = r;
          open_source(app, copy);
          break;
        }
      ImGui::EndMenu();
    }
    ImGui::Separator();
    if (ImGui::MenuItem("Save screenshot", "Ctrl+S")) app.screenshot_requested = true;
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) app.quit = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    const char* keys[] = {"Ctrl+1", "Ctrl+2", "Ctrl+3", "Ctrl+4"};
    for (int i = 0; i < static_cast<int>(PanelId::Count); ++i)
      ImGui::MenuItem(panel_name(static_cast<PanelId>(i)), i < 4 ? keys[i] : nullptr, &app.show[i]);
    ImGui::Separator();
    if (ImGui::MenuItem("Dark theme", "Ctrl+T", app.dark)) set_theme(app, !app.dark);
    ImGui::MenuItem("Log counts", "Ctrl+L", &app.hist_log_y);
    ImGui::MenuItem("Values over log2|x|", "Ctrl+E", &app.hist_log_x);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    ImGui::TextUnformatted(
        "Ctrl+O  open a file          Ctrl+D  edit the datatype string\n"
        "Ctrl+T  dark / light theme   Ctrl+L  log counts\n"
        "Ctrl+E  values over log2|x|  F5      recompute\n"
        "Esc     cancel running work  Ctrl+S  screenshot\n"
        "Ctrl+1..4  show a panel      Ctrl+Q  quit\n"
        "Drop a file on the window to open it.");
    ImGui::EndMenu();
  }
  ImGui::EndMainMenuBar();
}

void draw_status_bar(AppState& app) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float h = ImGui::GetFrameHeight() + 6;
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - h));
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, h));
  const ImGuiWindowFlags f =
      ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
      ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 3));
  if (app.analyzer.running() && app.frame > 0) {
    // The last frame's time, drawn while the analysis ran.
    const double ms = ImGui::GetIO().DeltaTime * 1e3;
    AppState::BusyFrames& b = app.busy_frames;
    ++b.frames;
    b.max_ms = std::max(b.max_ms, ms);
    b.sum_ms += ms;
    if (b.ms.size() >= 4096) b.ms.erase(b.ms.begin(), b.ms.begin() + 2048);
    b.ms.push_back(static_cast<float>(ms));
  }
  if (ImGui::Begin("##status", nullptr, f)) {
    Job<Loaded>* lj = &app.loader;
    if (app.loader.running() || app.analyzer.running()) {
      const bool loading = app.loader.running();
      const double p = loading ? lj->progress() : app.analyzer.progress();
      ImGui::ProgressBar(static_cast<float>(p), ImVec2(ImGui::GetFontSize() * 10, 0));
      ImGui::SameLine();
      ImGui::Text("%s (%.1f s)", (loading ? lj->what() : app.analyzer.what()).c_str(),
                  loading ? lj->elapsed_s() : app.analyzer.elapsed_s());
      ImGui::SameLine();
      if (ImGui::SmallButton("Cancel (Esc)")) app.loader.cancel(), app.analyzer.cancel();
    } else if (!app.messages.empty()) {
      // One line that stops before the frame rate; the whole history on hover.
      const std::string& m = app.messages.back();
      const float room = ImGui::GetWindowWidth() - ImGui::CalcTextSize("000 fps").x - 40;
      std::string line = m.substr(0, m.find('\n'));
      if (line.size() < m.size()) line += " ...";
      ImGui::TextDisabled("%s", fit_text(line, room).c_str());
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        for (const std::string& m : app.messages) ImGui::TextUnformatted(m.c_str());
        ImGui::EndTooltip();
      }
    } else {
      ImGui::TextDisabled("ready");
    }
    const char* fmt = "%.0f fps";
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt, app.fps);
    ImGui::SameLine(ImGui::GetWindowWidth() - ImGui::CalcTextSize(buf).x - 12);
    ImGui::TextDisabled("%s", buf);
  }
  ImGui::End();
  ImGui::PopStyleVar();
}

}  // namespace castscope::gui
