// Model map panel: the model's quantizable tensors (grouped by layer) x the candidate datatypes,
// each cell coloured by the chosen metric with its value on hover; a click assigns that datatype
// to the tensor in the plan, and the plan's totals follow live.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "map_groups.hpp"
#include "panels.hpp"

namespace castscope::gui {
namespace {

// Colour for a value placed in [lo, hi] (log scale for error metrics): red (worst) to green.
ImU32 cell_colour(double v, double lo, double hi, bool higher_better, bool log_scale) {
  if (!std::isfinite(v))
    return v > 0 && higher_better ? IM_COL32(40, 150, 60, 160) : IM_COL32(120, 120, 120, 120);
  auto f = [&](double x) { return log_scale ? std::log10(std::max(x, 1e-30)) : x; };
  double t = hi > lo ? (f(v) - f(lo)) / (f(hi) - f(lo)) : 0.5;
  if (log_scale && !(f(hi) > f(lo))) t = 0.5;
  t = std::clamp(t, 0.0, 1.0);
  if (!higher_better) t = 1.0 - t;
  const int r = static_cast<int>(200 * (1 - t) + 40 * t),
            g = static_cast<int>(60 * (1 - t) + 170 * t);
  return IM_COL32(r, g, 60, 170);
}

// Breaks `s` into lines no wider than `width`, after '_' or ' ' where it can (a datatype string
// "e4m3fn_e8m0_t32" becomes "e4m3fn_" / "e8m0_t32"), inside a part only when one part is wider.
std::string wrap_words(const std::string& s, float width) {
  std::string out, line;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of("_ ", i);
    j = j == std::string::npos ? s.size() : j + 1;
    std::string part = s.substr(i, j - i);
    i = j;
    if (!line.empty() && ImGui::CalcTextSize((line + part).c_str()).x > width) {
      out += line + "\n";
      line.clear();
    }
    while (ImGui::CalcTextSize(part.c_str()).x > width && part.size() > 1) {
      size_t k = part.size() - 1;
      while (k > 1 && ImGui::CalcTextSize(part.substr(0, k).c_str()).x > width) --k;
      out += part.substr(0, k) + "\n";
      part = part.substr(k);
    }
    line += part;
  }
  return out + line;
}

// "12.3K", "4.19M": a parameter count in a narrow column.
std::string count_str(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gG", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3gK", n / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

}  // namespace

void draw_model_map_panel(AppState& app) {
  if (!begin_panel(app, PanelId::ModelMap, "Model map", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  save_view_button(app, PanelId::ModelMap);
  const bool running = app.map_job.running();
  ImGui::BeginDisabled(running);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 24);
  ImGui::InputText("datatypes", app.map_dtypes, sizeof app.map_dtypes);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Columns: datatype strings separated by spaces");
  ImGui::SameLine();
  const char* sizes[] = {"none", "16", "32", "64", "128", "256"};
  int sel = 0;
  for (int i = 1; i < 6; ++i)
    if (app.map_rotate == (8 << i)) sel = i;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  if (ImGui::Combo("rotate", &sel, sizes, 6)) app.map_rotate = sel ? (8 << sel) : 0;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Block Hadamard rotation before each cast (inverted after)");
  if (app.map_rotate) {
    ImGui::SameLine();
    ImGui::Checkbox("random signs", &app.map_signs);
    if (app.map_signs) {
      ImGui::SameLine();
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
      ImGui::InputInt("seed", &app.map_seed, 0);
    }
  }
  if (ImGui::Button(app.model ? "Sweep" : "Sweep (open a model)")) start_model_map(app);
  ImGui::EndDisabled();
  ImGui::SameLine();
  const char* metrics[] = {"SNR (dB)", "relative error", "max error", "clipped %",
                           "output SNR (dB)"};
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9);
  ImGui::Combo("metric", &app.map_metric, metrics, 5);
  ImGui::SameLine();
  ImGui::BeginDisabled(running);
  ImGui::Checkbox("with activations", &app.map_activations);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Also the output SNR of y = x W^T for every weight whose input width fits the "
        "activations of the Activations panel (file, or synthetic with outlier channels); "
        "activations cast to the column's datatype");
  job_line(app.map_job);
  if (!app.map_error.empty()) error_text(app.map_error);
  const ModelMap* m = app.model_map.get();
  if (!m) {
    ImGui::TextWrapped(
        "Sweep casts every quantizable tensor of the open model (float, 2-D or more, embeddings "
        "left out) to every datatype, one tensor in memory at a time, on the GPU when there is "
        "one. Click a cell to assign its datatype in the plan.");
    ImGui::End();
    return;
  }
  const MapTotals t = plan_totals_over_map(app);
  ImGui::Text("%zu tensors, %.3g M values, %.1f s%s%s | plan: %s of %s, %.3f bits/value",
              m->rows.size(), m->values / 1e6, m->seconds, m->rotate.enabled() ? ", rotated " : "",
              m->rotate.enabled() ? m->rotate.str().c_str() : "", human_bytes(t.bits / 8).c_str(),
              human_bytes(t.stored_bits / 8).c_str(), t.avg_bits());
  const MapMetric metric = static_cast<MapMetric>(app.map_metric);
  const bool hb = higher_is_better(metric);
  const bool log_scale = metric == MapMetric::RelErr || metric == MapMetric::MaxErr;
  double lo = INFINITY, hi = -INFINITY;
  for (const MapRow& r : m->rows)
    for (const MapCell& c : r.cells) {
      const double v = cell_value(c, metric);
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  constexpr int kFixed = 4;  // tensor, shape, parameters, plan
  const int ncol = std::min(static_cast<int>(m->columns.size()) + kFixed, 64);
  const float fs = ImGui::GetFontSize();
  // Shapes are never shortened (their column is as wide as the widest); the datatype columns
  // are as wide as their values; the tensor column gives up what the columns need to fit the
  // panel, down to a floor, and past that the table scrolls sideways (a hovered or clicked cell
  // is scrolled to).
  const ImGuiStyle& st = ImGui::GetStyle();
  float shape_w = ImGui::CalcTextSize("shape").x;
  for (const MapRow& r : m->rows)
    shape_w = std::max(shape_w, ImGui::CalcTextSize(shape_str(r.shape).c_str()).x);
  const float params_w = ImGui::CalcTextSize("params").x + fs * 0.5f;
  const float plan_w = std::max(ImGui::CalcTextSize("mxfp4e2").x, ImGui::CalcTextSize("plan").x);
  const float cell_w = std::max(ImGui::CalcTextSize("-99.99").x, ImGui::CalcTextSize("mxfp8e4").x);
  const float pad = 2 * st.CellPadding.x + 1;
  const float others =
      shape_w + params_w + plan_w + (ncol - kFixed) * cell_w + pad * ncol + st.ScrollbarSize;
  const float tensor_w = std::clamp(ImGui::GetContentRegionAvail().x - others, fs * 6, fs * 16);
  if (ImGui::BeginTable("##map", ncol,
                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                            ImGuiTableFlags_BordersInner | ImGuiTableFlags_SizingFixedFit,
                        ImVec2(0, 0))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("tensor", ImGuiTableColumnFlags_WidthFixed, tensor_w);
    ImGui::TableSetupColumn("shape", ImGuiTableColumnFlags_WidthFixed, shape_w);
    ImGui::TableSetupColumn("params", ImGuiTableColumnFlags_WidthFixed, params_w);
    ImGui::TableSetupColumn("plan", ImGuiTableColumnFlags_WidthFixed, plan_w);
    for (int c = 0; c + kFixed < ncol; ++c)
      ImGui::TableSetupColumn(m->columns[static_cast<size_t>(c)].c_str(),
                              ImGuiTableColumnFlags_WidthFixed, cell_w);
    // Headers wrap (a datatype string breaks after its '_') instead of being cut.
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < ncol; ++c) {
      ImGui::TableSetColumnIndex(c);
      const char* name = ImGui::TableGetColumnName(c);
      ImGui::TextUnformatted(wrap_words(name, ImGui::GetContentRegionAvail().x).c_str());
      if (c >= kFixed && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%s", name,
                          m->dtypes[static_cast<size_t>(c - kFixed)].label().c_str());
    }
    // Rows of one group together, groups in the order they first appear.
    std::vector<std::string> groups(m->rows.size());
    std::map<std::string, size_t> first;
    for (size_t i = 0; i < m->rows.size(); ++i) {
      groups[i] = map_group(m->rows[i]);
      first.emplace(groups[i], i);
    }
    std::vector<size_t> order(m->rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return first[groups[x]] < first[groups[y]]; });
    std::string group = "\x01";
    for (const size_t i : order) {
      const MapRow& r = m->rows[i];
      const std::string& g = groups[i];
      if (g != group) {
        group = g;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
        name_text(group.empty() ? "(outside layers)" : group);
        ImGui::PopStyleColor();
      }
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string shown = !group.empty() && r.name.size() > group.size() &&
                                        r.name.compare(0, group.size(), group) == 0
                                    ? r.name.substr(group.size() + 1)
                                    : r.name;
      ImGui::Indent(fs * 0.6f);
      // Figures of a tensor whose layout nothing in the file showed say so beside them.
      const std::string fitted = fit_text(shown + (r.layout.guessed ? "  (layout guessed)" : ""),
                                          ImGui::GetContentRegionAvail().x);
      ImGui::TextUnformatted(fitted.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%s %s, %lld values\ncast along %s\n%s", r.name.c_str(),
                          r.stored_dtype.c_str(), shape_str(r.shape).c_str(),
                          static_cast<long long>(r.numel), r.axis.c_str(),
                          describe_layout(r.layout, r.shape).c_str());
      ImGui::Unindent(fs * 0.6f);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(shape_str(r.shape).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(count_str(static_cast<double>(r.numel)).c_str());
      const auto assigned =
          app.plan.dtype_for({r.name, r.stored_dtype, r.shape, r.stored_bytes, "", r.layout});
      ImGui::TableNextColumn();
      name_text(assigned ? (assigned->name().empty() ? assigned->str() : assigned->name())
                         : std::string("keep"));
      for (size_t c = 0; c < r.cells.size() && c + kFixed < 64; ++c) {
        ImGui::TableNextColumn();
        const MapCell& cell = r.cells[c];
        char buf[48];
        const double v = cell_value(cell, metric);
        if (std::isnan(v)) {
          std::snprintf(buf, sizeof buf, "n/a");
        } else {
          ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, cell_colour(v, lo, hi, hb, log_scale));
          if (metric == MapMetric::SNR || metric == MapMetric::Clipped ||
              metric == MapMetric::OutputSNR)
            std::snprintf(buf, sizeof buf, "%.2f", v);
          else
            std::snprintf(buf, sizeof buf, "%.2e", v);
        }
        const bool chosen = assigned && *assigned == m->dtypes[c];
        // "###TENSOR|DATATYPE" keeps the cell's ID off its value: scripts click a cell by name.
        const std::string label = std::string(buf) + "###" + r.name + "|" + m->columns[c];
        if (ImGui::Selectable(label.c_str(), chosen)) assign_from_map(app, i, c);
        if (ImGui::IsItemHovered()) {
          if (cell.error.empty()) {
            double nominal = 0;
            int64_t row_len = 0;
            const double bits = map_cell_bits(app, r, c, &nominal, &row_len);
            const std::string bits_text = widgets::bits_label(bits, nominal, row_len);
            ImGui::SetTooltip(
                "%s -> %s\nSNR %.3f dB   rel. error %.4g\nmax error %.4g   clipped %.4f%%\n"
                "%s bits per value%s%s",
                r.name.c_str(), m->columns[c].c_str(), cell.stats.snr_db,
                metric_value(cell.stats, MapMetric::RelErr), cell.stats.max_abs_err,
                cell.stats.clipped_pct(), bits_text.c_str(), cell.has_output ? "\noutput SNR " : "",
                cell.has_output ? std::to_string(cell.out_snr_db).c_str() : "");
            char hv[256];
            std::snprintf(hv, sizeof hv, "%s | %s: %s", r.name.c_str(), m->columns[c].c_str(), buf);
            app.map_hover = hv;
          } else {
            ImGui::SetTooltip("%s", cell.error.c_str());
          }
        }
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace castscope::gui
