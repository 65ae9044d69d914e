// Views panel: histograms (value, exponent, error), the tile-scale heatmap, the mask view and
// the metrics table of the latest analysis, laid out as a grid so all are visible at once.
#include <imgui.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>

#include "castscope/widgets/histogram_plot.hpp"
#include "castscope/widgets/decisions.hpp"
#include "castscope/widgets/metrics_table.hpp"
#include "castscope/widgets/view_csv.hpp"
#include "panels.hpp"

namespace castscope::gui {

namespace {

constexpr ImU32 kOrig = IM_COL32(70, 140, 230, 200);
constexpr ImU32 kCast = IM_COL32(245, 150, 40, 255);
constexpr ImU32 kErr = IM_COL32(200, 90, 200, 220);
constexpr ImU32 kOther = IM_COL32(90, 220, 220, 255);  // a pinned datatype overlaid

// The first pinned datatype other than the current one, cast on the same tensor by the
// comparison panel: the histograms overlay its cast on the same axes.
const widgets::Analysis* overlay(const AppState& app, const widgets::Analysis& a) {
  if (!app.compare) return nullptr;
  for (const auto& r : app.compare->rows)
    if (r && r->tensor == a.tensor && r->shape == a.shape && !(r->dtype == a.dtype)) return r.get();
  return nullptr;
}

// Every view's data as CSV files next to the metrics (castscope-<view>.csv).
void save_view_data(AppState& app, const widgets::Analysis& a, const widgets::Analysis* other) {
  save_metrics(app, "castscope-metrics.csv");
  save_text(app, "castscope-value-histogram.csv",
            widgets::value_histogram_csv(a, other, app.hist_log_x));
  save_text(app, "castscope-exponent-histogram.csv", widgets::exponent_histogram_csv(a, other));
  save_text(app, "castscope-error-histogram.csv", widgets::error_histogram_csv(a, other));
  save_text(app, "castscope-tile-map.csv", widgets::tile_map_csv(a));
  save_text(app, "castscope-mask.csv", widgets::mask_csv(a));
}

// One view's cell. Right-clicking it offers the view alone as castscope-NAME.png and, where
// the view has data (csv), castscope-NAME.csv.
bool cell(AppState& app, const char* id, const char* title, ImVec2 size, const char* name,
          const std::function<std::string()>& csv = {}) {
  ImGui::BeginChild(id, size, true);
  ImGui::TextUnformatted(title);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("right-click: save this view as PNG or CSV");
  if (ImGui::BeginPopupContextWindow("##save")) {
    const std::string png = std::string("castscope-") + name + ".png";
    const std::string csv_file = std::string("castscope-") + name + ".csv";
    if (ImGui::MenuItem(("Save " + png).c_str())) {
      app.view_shot_panel = static_cast<int>(PanelId::Views);
      app.view_shot_path = png;
      app.view_shot_rect = app.view_cell_rect[id];
    }
    if (csv && ImGui::MenuItem(("Save " + csv_file).c_str())) save_text(app, csv_file, csv());
    ImGui::EndPopup();
  }
  const ImVec2 p = ImGui::GetWindowPos(), sz = ImGui::GetWindowSize();
  app.view_cell_rect[id] = ImVec4(p.x, p.y, sz.x, sz.y);
  return true;
}

}  // namespace

void draw_views_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Views, "Views", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  const widgets::Analysis* a = app.analysis.get();
  save_view_button(app, PanelId::Views);
  ImGui::SameLine();
  if (ImGui::SmallButton("Save CSV") && a) save_view_data(app, *a, overlay(app, *a));
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Save every view's data in the working directory: castscope-metrics.csv,\n"
        "castscope-value-histogram.csv, castscope-exponent-histogram.csv,\n"
        "castscope-error-histogram.csv, castscope-tile-map.csv, castscope-mask.csv");
  ImGui::SameLine();
  if (ImGui::SmallButton("Save JSON")) save_metrics(app, "castscope-metrics.json");
  ImGui::SameLine();
  ImGui::Checkbox("log counts", &app.hist_log_y);
  ImGui::SameLine();
  ImGui::Checkbox("values over log2|x|", &app.hist_log_x);
  // Metrics first: the running analysis' statistics, before its histograms, tile map and mask.
  const widgets::Analysis* part = app.analyzer.running() ? app.partial.get() : nullptr;
  if (app.analyzer.running()) {
    ImGui::ProgressBar(static_cast<float>(app.analyzer.progress()),
                       ImVec2(ImGui::GetFontSize() * 8, 0), part ? "views..." : "casting...");
    if (part) {
      ImGui::SameLine();
      ImGui::TextDisabled("%s: SNR %.2f dB; the other views follow", part->dtype.label().c_str(),
                          part->stats.snr_db);
    }
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
  draw_method_summary(app);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float sp = ImGui::GetStyle().ItemSpacing.x;
  const float cw = (avail.x - sp) / 2, ch = (avail.y - 2 * ImGui::GetStyle().ItemSpacing.y) / 3;
  const float ph = ch - ImGui::GetFrameHeightWithSpacing() - ImGui::GetStyle().WindowPadding.y * 2;

  const widgets::Analysis* other = overlay(app, *a);
  const std::string other_label =
      other ? (other->dtype.name().empty() ? other->dtype.str() : other->dtype.name()) + " (pinned)"
            : "";
  widgets::HistPlotOptions vo;
  std::vector<widgets::HistSeries> vs;
  if (app.hist_log_x) {
    vo.x0 = a->log_orig.lo;
    vo.dx = a->log_orig.bin_width();
    vo.x_label = "log2|x|";
    vo.x_is_log2 = true;
    vs = {{"original", kOrig, &a->log_orig.counts, true},
          {"cast", kCast, &a->log_cast.counts, false}};
    if (other && other->log_cast.lo == a->log_orig.lo && other->log_cast.hi == a->log_orig.hi)
      vs.push_back({other_label, kOther, &other->log_cast.counts, false, NAN, true});
  } else {
    vo.x0 = a->value_orig.lo;
    vo.dx = a->value_orig.bin_width();
    vo.x_label = "x";
    vs = {{"original", kOrig, &a->value_orig.counts, true},
          {"cast", kCast, &a->value_cast.counts, false}};
    if (other && other->value_cast.lo == a->value_orig.lo &&
        other->value_cast.hi == a->value_orig.hi)
      vs.push_back({other_label, kOther, &other->value_cast.counts, false, NAN, true});
  }
  vo.log_y = app.hist_log_y;
  vo.view = &app.hist_view[0];
  cell(app, "##value", "Value histogram", ImVec2(cw, ch), "value-histogram",
       [&] { return widgets::value_histogram_csv(*a, other, app.hist_log_x); });
  widgets::draw_histogram("value", vs, vo, ImVec2(0, ph));
  ImGui::EndChild();
  ImGui::SameLine();

  cell(app, "##exp", "Exponent histogram (binades)", ImVec2(cw, ch), "exponent-histogram",
       [&] { return widgets::exponent_histogram_csv(*a, other); });
  widgets::HistPlotOptions eo;
  eo.x0 = a->exp_lo;
  eo.dx = 1;
  eo.log_y = app.hist_log_y;
  eo.shade_lo = a->rep_lo;
  eo.shade_hi = a->rep_hi;
  eo.shade_label = "representable";
  eo.shade_note = "magnitudes the datatype keeps: " + a->rep_note;
  eo.x_label = "floor(log2|x|)";
  eo.x_is_log2 = true;
  eo.view = &app.hist_view[1];
  std::vector<widgets::HistSeries> es = {{"original", kOrig, &a->exp_orig, true},
                                         {"cast", kCast, &a->exp_cast, false}};
  if (other)
    es.push_back(
        {other_label, kOther, &other->exp_cast, false, static_cast<double>(other->exp_lo), true});
  widgets::draw_histogram("exp", es, eo, ImVec2(0, ph));
  ImGui::EndChild();

  cell(app, "##err", "Error histogram (cast - original)", ImVec2(cw, ch), "error-histogram",
       [&] { return widgets::error_histogram_csv(*a, other); });
  widgets::HistPlotOptions xo;
  xo.x0 = a->error.lo;
  xo.dx = a->error.bin_width();
  xo.log_y = app.hist_log_y;
  xo.x_label = "q - x";
  xo.view = &app.hist_view[2];
  std::vector<widgets::HistSeries> xs = {{"error", kErr, &a->error.counts, true}};
  // The pinned datatype's errors share the axis only when binned over the same range.
  if (other && other->error.lo == a->error.lo && other->error.hi == a->error.hi)
    xs.push_back({"error, " + other_label, kOther, &other->error.counts, false, NAN, true});
  widgets::draw_histogram("err", xs, xo, ImVec2(0, ph));
  ImGui::EndChild();
  ImGui::SameLine();

  const widgets::Analysis* ma = part ? part : a;
  cell(app, "##metrics", part ? "Metrics (new datatype)" : "Metrics", ImVec2(cw, ch), "metrics",
       [&] { return widgets::metrics_csv({ma}); });
  widgets::draw_metrics_table("metrics", ma->stats, ma->bits_per_value, ma->nominal_bits,
                              ma->row_length);
  ImGui::EndChild();

  cell(app, "##heat", "Tile scales", ImVec2(cw, ch), "tile-map",
       [&] { return widgets::tile_map_csv(*a); });
  {
    widgets::HeatmapExtras ex;
    ex.clipped = a->tile_clipped.empty() ? nullptr : &a->tile_clipped;
    ex.clipped_note = a->tile_clipped_note;
    ex.elem_rows = a->view.rows, ex.elem_cols = a->view.cols;
    ex.tensor_scale = a->tensor_scale;
    const int64_t clicked = widgets::draw_heatmap(
        "heat", app.heat, a->tiles ? &*a->tiles : nullptr, a->tiles_note,
        ImVec2(0, ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y), ex);
    if (clicked >= 0) {
      // A click opens the teaching view on that tile.
      app.teach_tile = static_cast<int>(clicked);
      app.show[static_cast<int>(PanelId::Teach)] = true;
      app.focus_panel = static_cast<int>(PanelId::Teach);
    }
  }
  ImGui::EndChild();
  ImGui::SameLine();

  // The title says what the mask marks; the widget's summary line then fits beside its button.
  const std::string mask_title = "Mask: " + a->mask.what;
  cell(app, "##mask", mask_title.c_str(), ImVec2(cw, ch), "mask",
       [&] { return widgets::mask_csv(*a); });
  // Single elements of the "cast to zero" mask, from the input and the cast values (read from
  // the GPU when they stayed there); a sparsity keep-mask is not kept per element.
  widgets::MaskDetail detail;
  if (a->input && !a->dtype.sparse_tile())
    detail = [a](int64_t r0, int64_t c0, int64_t h, int64_t w, std::vector<uint8_t>* out) {
      Tensor q;
      try {
        q = widgets::values_block(*a, r0, c0, h, w);
      } catch (const Error&) {
        return false;
      }
      if (!q || q.shape()[0] != h || q.shape()[1] != w) return false;
      const widgets::View2D& v = a->view;
      const float* x = a->input.ptr<float>();
      const float* qp = q.ptr<float>();
      out->resize(static_cast<size_t>(h * w));
      for (int64_t r = 0; r < h; ++r)
        for (int64_t c = 0; c < w; ++c) {
          const float xv = x[v.at(r0 + r, c0 + c)];
          (*out)[static_cast<size_t>(r * w + c)] =
              std::isfinite(xv) && xv != 0 && qp[r * w + c] == 0;
        }
      return true;
    };
  widgets::draw_mask_view(
      "mask", app.mask, a->mask,
      ImVec2(0, ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y), detail);
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace castscope::gui
