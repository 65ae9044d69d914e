// One function per panel (each in its own file); all take the app state and draw into their
// own window.
#pragma once

#include <functional>

#include <imgui.h>

#include <cstdio>
#include <string>

#include "app_state.hpp"

namespace castscope::gui {

void draw_menu_bar(AppState& app);
void draw_status_bar(AppState& app);
void draw_files_panel(AppState& app);
void draw_tensors_panel(AppState& app);
void draw_composer_panel(AppState& app);
// Part of the teaching view for codebooks (teach_codebook.cpp): every mapping as a row of ticks on
// the compute format's axis (X maps a value to a screen x), the current tile's choices marked.
void draw_codebook_mappings(const widgets::Analysis& a, int64_t tile,
                            const std::function<float(double)>& X, float x0, float x1);
// The composer's method and calibration, and rtn beside the method in the Views and Compare
// (panel_method.cpp); the teaching view's codes of a GPTQ tile beside the nearest ones
// (teach_method.cpp) for the elements of view indices `idx`.
void draw_method_controls(AppState& app);
void draw_method_summary(AppState& app);
void draw_method_compare(AppState& app);
void draw_teach_method(AppState& app, const widgets::Analysis& a, const std::vector<int64_t>& idx);
void draw_views_panel(AppState& app);
void draw_scale_modes_panel(AppState& app);
void draw_compare_panel(AppState& app);
void draw_plan_panel(AppState& app);
void draw_plan_rules(AppState& app);   // the plan panel's rule editor (panel_plan_rules.cpp)
void draw_plan_budget(AppState& app);  // the plan panel's budget planner (panel_plan_budget.cpp)
void draw_plan_evaluate(
    AppState& app);  // the plan panel's end-to-end "Evaluate" (plan_evaluate.cpp)
// For scripted sessions: whether the evaluation runs, and its state as JSON (running, error,
// the last result's sizes and outputs).
bool plan_evaluate_running();
std::string plan_evaluate_state_json();
void draw_export_panel(AppState& app);
void draw_matmul_panel(AppState& app);
void draw_teach_panel(AppState& app);
void draw_model_map_panel(AppState& app);
void draw_activations_panel(AppState& app);

// "Save PNG" for a panel: the window's pixels are written after the next frame.
void save_view_button(AppState& app, PanelId id);
// Progress bar + cancel for a panel's own job.
template <class R>
void job_line(Job<R>& job) {
  if (!job.running()) return;
  const double p = job.progress(), t = job.elapsed_s();
  char buf[96];
  if (p > 0.02)
    std::snprintf(buf, sizeof buf, "%.0f%%  %.1f s left", 100 * p, t * (1 - p) / p);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", t);
  ImGui::ProgressBar(static_cast<float>(p), ImVec2(ImGui::GetFontSize() * 14, 0), buf);
  ImGui::SameLine();
  if (ImGui::SmallButton("Cancel")) job.cancel();
}

// Places a panel's window at its default spot (fractions of the display) the first time, or
// every frame of a scripted session so screenshots are reproducible; brings it to front when
// the app asks.
bool begin_panel(AppState& app, PanelId id, const char* title, float x, float y, float w, float h,
                 ImGuiWindowFlags flags = 0);

// `s` shortened in the middle ("model.lay...q_proj.weight") to fit `width` pixels; `s` itself
// when it fits.
std::string fit_text(const std::string& s, float width);
// A name in at most `width` pixels (0: what is left of the line), shortened in the middle when it
// does not fit, with the full name on hover.
void name_text(const std::string& s, float width = 0);
// An error in red that wraps at the window's edge instead of running past it.
void error_text(const std::string& s);

// A text field `em` font sizes wide showing `hint` while empty; with `tip`, that on hover.
template <size_t N>
void hint_field(const char* id, const char* hint, char (&buf)[N], float em,
                const char* tip = nullptr) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * em);
  ImGui::InputTextWithHint(id, hint, buf, N);
  if (tip && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
}

// `file` relative to the opened folder when a folder is open and holds it ("shards/a.safetensors"),
// else its own name within the opened file's folder; `file` itself otherwise.
std::string model_relative(const AppState& app, const std::string& file);

// Formats a byte count as "12.3 MiB".
std::string human_bytes(double bytes);

}  // namespace castscope::gui
