// Scale-mode comparison: the five scale-selection rules side by side on the current tensor and
// datatype: SNR, clipped %, the cast histograms overlaid, and the tiles whose scale differs from
// the floor rule.
#include <imgui.h>

#include <tuple>

#include <cmath>

#include "castscope/widgets/histogram_plot.hpp"
#include "panels.hpp"

namespace castscope::gui {

void draw_scale_modes_panel(AppState& app) {
  if (!begin_panel(app, PanelId::ScaleModes, "Scale modes", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  save_view_button(app, PanelId::ScaleModes);
  ImGui::SameLine();
  ImGui::TextDisabled("%s on %s", app.composer.dtype.str().c_str(),
                      app.loaded ? app.loaded->tensor.c_str() : "-");
  job_line(app.scale_job);
  const ScaleModeResult* r = app.scale_modes.get();
  if (!r || r->runs.empty()) {
    ImGui::TextDisabled(app.scale_job.running() ? "computing..." : "open a tensor");
    ImGui::End();
    return;
  }
  const ImU32 colors[] = {IM_COL32(70, 140, 230, 255), IM_COL32(230, 80, 70, 255),
                          IM_COL32(245, 170, 40, 255), IM_COL32(90, 190, 110, 255),
                          IM_COL32(180, 100, 220, 255)};
  if (ImGui::BeginTable("##modes", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) {
    for (const char* h : {"mode", "SNR (dB)", "clipped %", "MSE", "max error", "tiles differing"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < r->runs.size(); ++i) {
      const widgets::ScaleModeRun& m = r->runs[i];
      const Stats& s = m.analysis->stats;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushStyleColor(ImGuiCol_Text, colors[i]);
      if (ImGui::Selectable(to_string(m.mode), app.scale_mode_sel == static_cast<int>(i),
                            ImGuiSelectableFlags_SpanAllColumns))
        app.scale_mode_sel = static_cast<int>(i);
      ImGui::PopStyleColor();
      ImGui::TableNextColumn();
      ImGui::Text(std::isinf(s.snr_db) ? "exact" : "%.3f", s.snr_db);
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", s.clipped_pct());
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", s.mse);
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", s.max_abs_err);
      ImGui::TableNextColumn();
      if (m.analysis->tiles)
        ImGui::Text("%lld of %zu", static_cast<long long>(m.tiles_differ), m.differs.size());
      else
        ImGui::TextDisabled("no tiles");
    }
    ImGui::EndTable();
  }
  const float h = (ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing() * 2) / 2;
  ImGui::TextUnformatted("Cast values, all modes (original filled)");
  std::vector<widgets::HistSeries> series;
  const widgets::Analysis& a0 = *r->runs[0].analysis;
  series.push_back({"original", IM_COL32(128, 128, 128, 120), &a0.log_orig.counts, true});
  for (size_t i = 0; i < r->runs.size(); ++i)
    series.push_back(
        {to_string(r->runs[i].mode), colors[i], &r->runs[i].analysis->log_cast.counts, false});
  widgets::HistPlotOptions o;
  o.x0 = a0.log_orig.lo;
  o.dx = a0.log_orig.bin_width();
  o.log_y = app.hist_log_y;
  o.x_label = "log2|x|";
  o.x_is_log2 = true;
  widgets::draw_histogram("modes_hist", series, o, ImVec2(0, h));
  const size_t sel = std::min<size_t>(app.scale_mode_sel, r->runs.size() - 1);
  ImGui::Text("Tiles whose scale under %s differs from floor (red)", to_string(r->runs[sel].mode));
  const widgets::Analysis& as = *r->runs[sel].analysis;
  widgets::HeatmapExtras ex;
  ex.marks = r->runs[sel].differs.empty() ? nullptr : &r->runs[sel].differs;
  ex.clipped = as.tile_clipped.empty() ? nullptr : &as.tile_clipped;
  ex.clipped_note = as.tile_clipped_note;
  ex.elem_rows = as.view.rows, ex.elem_cols = as.view.cols;
  ex.tensor_scale = as.tensor_scale;
  widgets::draw_heatmap(
      "modes_heat", app.scale_heat, as.tiles ? &*as.tiles : nullptr, as.tiles_note,
      ImVec2(0, ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y), ex);
  ImGui::End();
}

}  // namespace castscope::gui
