// Views panel: histograms (value, exponent, error), the tile-scale heatmap, the mask view and
// the metrics table of the latest analysis, laid out as a grid so all are visible at once.
#include <imgui.h>

#include <cmath>

#include "castscope/widgets/histogram_plot.hpp"
#include "castscope/widgets/metrics_table.hpp"
#include "panels.hpp"

namespace castscope::gui {

namespace {

constexpr ImU32 kOrig = IM_COL32(70, 140, 230, 200);
constexpr ImU32 kCast = IM_COL32(245, 150, 40, 255);
constexpr ImU32 kErr = IM_COL32(200, 90, 200, 220);

bool cell(const char* id, const char* title, ImVec2 size) {
  ImGui::BeginChild(id, size, true);
  ImGui::TextUnformatted(title);
  return true;
}

}  // namespace

void draw_views_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Views, "Views", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  const widgets::Analysis* a = app.analysis.get();
  save_view_button(app, PanelId::Views);
  ImGui::SameLine();
  if (ImGui::SmallButton("Save CSV")) save_metrics(app, "castscope-metrics.csv");
  ImGui::SameLine();
  if (ImGui::SmallButton("Save JSON")) save_metrics(app, "castscope-metrics.json");
  ImGui::SameLine();
  ImGui::Checkbox("log counts", &app.hist_log_y);
  ImGui::SameLine();
  ImGui::Checkbox("values over log2|x|", &app.hist_log_x);
  if (app.analyzer.running()) {
    ImGui::ProgressBar(static_cast<float>(app.analyzer.progress()),
                       ImVec2(ImGui::GetFontSize() * 8, 0), "casting...");
  } else if (a) {
    ImGui::TextDisabled("%s  %s  ->  %s  (%s, views on the %s)", a->tensor.c_str(),
                        shape_str(a->shape).c_str(), a->dtype.str().c_str(), a->backend.c_str(),
                        a->on_device ? "GPU" : "CPU");
    if (!a->device_note.empty() && ImGui::IsItemHovered())
      ImGui::SetTooltip("views computed on the CPU: %s", a->device_note.c_str());
  }
  if (!app.analysis_error.empty()) error_text(app.analysis_error);
  if (!a) {
    ImGui::TextDisabled(app.busy() ? "working..." : "open a tensor to see its views");
    ImGui::End();
    return;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float sp = ImGui::GetStyle().ItemSpacing.x;
  const float cw = (avail.x - sp) / 2, ch = (avail.y - 2 * ImGui::GetStyle().ItemSpacing.y) / 3;
  const float ph = ch - ImGui::GetFrameHeightWithSpacing() - ImGui::GetStyle().WindowPadding.y * 2;

  widgets::HistPlotOptions vo;
  std::vector<widgets::HistSeries> vs;
  if (app.hist_log_x) {
    vo.x0 = a->log_orig.lo;
    vo.dx = a->log_orig.bin_width();
    vo.x_label = "log2|x|";
    vo.x_is_log2 = true;
    vs = {{"original", kOrig, &a->log_orig.counts, true},
          {"cast", kCast, &a->log_cast.counts, false}};
  } else {
    vo.x0 = a->value_orig.lo;
    vo.dx = a->value_orig.bin_width();
    vo.x_label = "x";
    vs = {{"original", kOrig, &a->value_orig.counts, true},
          {"cast", kCast, &a->value_cast.counts, false}};
  }
  vo.log_y = app.hist_log_y;
  cell("##value", "Value histogram", ImVec2(cw, ch));
  widgets::draw_histogram("value", vs, vo, ImVec2(0, ph));
  ImGui::EndChild();
  ImGui::SameLine();

  cell("##exp", "Exponent histogram (binades)", ImVec2(cw, ch));
  widgets::HistPlotOptions eo;
  eo.x0 = a->exp_lo;
  eo.dx = 1;
  eo.log_y = app.hist_log_y;
  eo.shade_lo = a->rep_lo;
  eo.shade_hi = a->rep_hi;
  eo.shade_label = "representable";
  eo.x_label = "floor(log2|x|)";
  eo.x_is_log2 = true;
  widgets::draw_histogram(
      "exp", {{"original", kOrig, &a->exp_orig, true}, {"cast", kCast, &a->exp_cast, false}}, eo,
      ImVec2(0, ph));
  ImGui::EndChild();

  cell("##err", "Error histogram (cast - original)", ImVec2(cw, ch));
  widgets::HistPlotOptions xo;
  xo.x0 = a->error.lo;
  xo.dx = a->error.bin_width();
  xo.log_y = app.hist_log_y;
  xo.x_label = "q - x";
  widgets::draw_histogram("err", {{"error", kErr, &a->error.counts, true}}, xo, ImVec2(0, ph));
  ImGui::EndChild();
  ImGui::SameLine();

  cell("##metrics", "Metrics", ImVec2(cw, ch));
  widgets::draw_metrics_table("metrics", a->stats, a->bits_per_value);
  ImGui::EndChild();

  cell("##heat", "Tile scales", ImVec2(cw, ch));
  widgets::draw_heatmap("heat", app.heat, a->tiles ? &*a->tiles : nullptr, a->tiles_note,
                        ImVec2(0, ph - 2 * ImGui::GetFrameHeightWithSpacing() - 14));
  ImGui::EndChild();
  ImGui::SameLine();

  cell("##mask", "Mask", ImVec2(cw, ch));
  widgets::draw_mask_view("mask", app.mask, a->mask,
                          ImVec2(0, ph - ImGui::GetFrameHeightWithSpacing()));
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace castscope::gui
