// Datatype comparison: pinned datatypes cast on the current tensor, their metrics in a table and
// a bits-per-value vs SNR chart with the Pareto front.
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>

#include "castscope/widgets/plot_math.hpp"
#include "panels.hpp"

namespace castscope::gui {

namespace {

const char* const kStarterSet[] = {"mxfp4e2", "nvfp4",   "mxfp6e2", "mxfp8e4",
                                   "int4_sc", "int8_sc", "mx6",     "bfloat16"};

void chart(const CompareResult& r, ImVec2 size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("chart", size);
  const bool hovered = ImGui::IsItemHovered();
  const float fs = ImGui::GetFontSize();
  const ImVec2 a(p0.x + fs * 3, p0.y + fs * 0.5f), b(p0.x + size.x - fs, p0.y + size.y - fs * 2.4f);
  dl->AddRectFilled(p0, ImVec2(p0.x + size.x, p0.y + size.y), ImGui::GetColorU32(ImGuiCol_FrameBg),
                    3);
  std::vector<widgets::TradeoffPoint> pts;
  for (const auto& a2 : r.rows) {
    double snr = a2->stats.snr_db;
    pts.push_back({a2->bits_per_value, snr});
  }
  if (pts.empty()) return;
  double bx0 = 1e9, bx1 = -1e9, sy0 = 1e9, sy1 = -1e9;
  for (const auto& p : pts) {
    bx0 = std::min(bx0, p.bits), bx1 = std::max(bx1, p.bits);
    if (std::isfinite(p.snr_db)) sy0 = std::min(sy0, p.snr_db), sy1 = std::max(sy1, p.snr_db);
  }
  if (sy0 > sy1) sy0 = 0, sy1 = 100;
  const double exact_y = sy1 + std::max(5.0, 0.1 * (sy1 - sy0));  // exact casts plot above the rest
  bx0 = std::floor(bx0 - 0.5), bx1 = std::ceil(bx1 + 0.5);
  sy0 = std::floor(sy0 - 3), sy1 = std::ceil(exact_y + 3);
  auto X = [&](double v) {
    return static_cast<float>(a.x + (v - bx0) / (bx1 - bx0) * (b.x - a.x));
  };
  auto Y = [&](double v) {
    return static_cast<float>(b.y - (v - sy0) / (sy1 - sy0) * (b.y - a.y));
  };
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), grid = ImGui::GetColorU32(ImGuiCol_Border);
  // Ticks at nice steps (1, 2, 5 x 10^k), labelled to the step's precision.
  const widgets::Ticks xt = widgets::linear_ticks(bx0, bx1, 6),
                       yt = widgets::linear_ticks(sy0, sy1, 6);
  for (size_t i = 0; i < xt.values.size(); ++i) {
    const float x = X(xt.values[i]);
    dl->AddLine(ImVec2(x, a.y), ImVec2(x, b.y), grid);
    dl->AddText(ImVec2(x - ImGui::CalcTextSize(xt.labels[i].c_str()).x / 2, b.y + 2), text,
                xt.labels[i].c_str());
  }
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const float y = Y(yt.values[i]);
    dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), grid);
    dl->AddText(ImVec2(p0.x + 4, y - fs / 2), text, yt.labels[i].c_str());
  }
  dl->AddText(ImVec2(b.x - ImGui::CalcTextSize("bits per value").x, b.y + fs * 1.1f), text,
              "bits per value");
  dl->AddText(ImVec2(a.x + 4, a.y), text, "SNR (dB)");
  std::vector<widgets::TradeoffPoint> plot = pts;
  for (auto& p : plot)
    if (std::isinf(p.snr_db)) p.snr_db = exact_y;
  const std::vector<size_t> front = widgets::pareto_front(plot);
  for (size_t i = 1; i < front.size(); ++i)
    dl->AddLine(ImVec2(X(plot[front[i - 1]].bits), Y(plot[front[i - 1]].snr_db)),
                ImVec2(X(plot[front[i]].bits), Y(plot[front[i]].snr_db)),
                IM_COL32(90, 200, 120, 255), 2.0f);
  // Each point's label goes to the first spot beside it that stays inside the plot and clear of
  // the labels placed before; a point with no such spot is named on hover only.
  const ImRect area(ImVec2(a.x, a.y), ImVec2(p0.x + size.x - 2, b.y));
  std::vector<ImRect> placed = {
      ImRect(ImVec2(a.x + 4, a.y), ImVec2(a.x + 4 + ImGui::CalcTextSize("SNR (dB)").x, a.y + fs)),
      ImRect(ImVec2(a.x + 4, a.y + fs * 1.2f),
             ImVec2(a.x + 4 + ImGui::CalcTextSize("Pareto front").x, a.y + fs * 2.2f))};
  for (size_t i = 0; i < plot.size(); ++i) {
    const bool on = std::find(front.begin(), front.end(), i) != front.end();
    const ImVec2 c(X(plot[i].bits), Y(plot[i].snr_db));
    dl->AddCircleFilled(c, fs * 0.3f,
                        on ? IM_COL32(90, 200, 120, 255) : IM_COL32(150, 150, 160, 255));
    placed.push_back(
        ImRect(ImVec2(c.x - fs * 0.3f, c.y - fs * 0.3f), ImVec2(c.x + fs * 0.3f, c.y + fs * 0.3f)));
  }
  for (size_t i = 0; i < plot.size(); ++i) {
    const ImVec2 c(X(plot[i].bits), Y(plot[i].snr_db));
    const std::string& label =
        r.rows[i]->dtype.name().empty() ? r.rows[i]->dtype.str() : r.rows[i]->dtype.name();
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    const ImVec2 spots[] = {
        {c.x + fs * 0.4f, c.y - fs * 0.9f},        {c.x + fs * 0.4f, c.y - fs * 0.1f},
        {c.x - ts.x - fs * 0.4f, c.y - fs * 0.9f}, {c.x - ts.x - fs * 0.4f, c.y - fs * 0.1f},
        {c.x - ts.x / 2, c.y - fs * 1.5f},         {c.x - ts.x / 2, c.y + fs * 0.4f}};
    for (const ImVec2& s : spots) {
      const ImRect box(s, ImVec2(s.x + ts.x, s.y + ts.y));
      if (!area.Contains(box)) continue;
      bool free = true;
      for (const ImRect& o : placed) free &= !o.Overlaps(box);
      if (!free) continue;
      dl->AddText(s, text, label.c_str());
      placed.push_back(box);
      break;
    }
  }
  for (size_t i = 0; i < plot.size(); ++i) {
    const bool on = std::find(front.begin(), front.end(), i) != front.end();
    const ImVec2 c(X(plot[i].bits), Y(plot[i].snr_db));
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      if (std::hypot(m.x - c.x, m.y - c.y) < fs * 0.6f)
        ImGui::SetTooltip("%s\n%.6g bits per value\nSNR %.6g dB%s",
                          r.rows[i]->dtype.label().c_str(), pts[i].bits, pts[i].snr_db,
                          on ? "\non the Pareto front" : "");
    }
  }
  dl->AddText(ImVec2(a.x + 4, a.y + fs * 1.2f), IM_COL32(90, 200, 120, 255), "Pareto front");
}

}  // namespace

void draw_compare_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Compare, "Compare datatypes", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  if (ImGui::Button("Pin current")) {
    const std::string d =
        app.composer.dtype.name().empty() ? app.composer.dtype.str() : app.composer.dtype.name();
    if (std::find(app.pinned.begin(), app.pinned.end(), d) == app.pinned.end())
      app.pinned.push_back(d);
  }
  ImGui::SameLine();
  if (ImGui::Button("Pin a starter set"))
    for (const char* d : kStarterSet)
      if (std::find(app.pinned.begin(), app.pinned.end(), d) == app.pinned.end())
        app.pinned.push_back(d);
  ImGui::SameLine();
  if (ImGui::Button("Clear")) app.pinned.clear();
  ImGui::SameLine();
  save_view_button(app, PanelId::Compare);
  const CompareResult* r = app.compare.get();
  if (r && !r->rows.empty()) {
    ImGui::SameLine();
    std::vector<const widgets::Analysis*> rows;
    for (const auto& a : r->rows) rows.push_back(a.get());
    if (ImGui::SmallButton("Save CSV"))
      save_text(app, "castscope-compare.csv", widgets::metrics_csv(rows));
    ImGui::SameLine();
    if (ImGui::SmallButton("Save JSON"))
      save_text(app, "castscope-compare.json", widgets::metrics_json(rows));
  }
  job_line(app.compare_job);
  if (app.pinned.empty()) {
    ImGui::TextWrapped(
        "Pin datatypes (the composer's current one, or a starter set) to compare them on %s.",
        app.loaded ? app.loaded->tensor.c_str() : "the current tensor");
    ImGui::End();
    return;
  }
  if (!r) {
    ImGui::TextDisabled("computing...");
    ImGui::End();
    return;
  }
  for (const std::string& e : r->errors) error_text(e);
  const float table_h = std::min(ImGui::GetContentRegionAvail().y * 0.45f,
                                 ImGui::GetFrameHeightWithSpacing() * (r->rows.size() + 1.5f));
  std::string unpin;
  if (ImGui::BeginTable(
          "##cmp", 7,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY,
          ImVec2(0, table_h))) {
    // The datatype takes what the numbers leave; a long string is shortened with its full form
    // on hover.
    ImGui::TableSetupColumn("datatype", ImGuiTableColumnFlags_WidthStretch);
    for (const char* h : {"bits/value", "SNR (dB)", "MSE", "clipped %", "max error", ""})
      ImGui::TableSetupColumn(h, ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < r->rows.size(); ++i) {
      const widgets::Analysis& a = *r->rows[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string name = a.dtype.name().empty() ? a.dtype.str() : a.dtype.name();
      ImGui::TextUnformatted(fit_text(name, ImGui::GetContentRegionAvail().x).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%s", a.dtype.label().c_str(), a.dtype.describe().c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", a.bits_per_value);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "storage bits per value on %s: %s", a.tensor.c_str(),
            widgets::bits_label(a.bits_per_value, a.nominal_bits, a.row_length).c_str());
      ImGui::TableNextColumn();
      ImGui::Text(std::isinf(a.stats.snr_db) ? "exact" : "%.3f", a.stats.snr_db);
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", a.stats.mse);
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", a.stats.clipped_pct());
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", a.stats.max_abs_err);
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(i));
      if (ImGui::SmallButton("unpin"))
        unpin = a.dtype.name().empty() ? a.dtype.str() : a.dtype.name();
      ImGui::PopID();
    }
    ImGui::EndTable();
  }
  if (!unpin.empty()) std::erase(app.pinned, unpin);
  draw_method_compare(app);
  ImGui::TextUnformatted("Bits per value vs SNR");
  chart(*r, ImVec2(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y - 4));
  ImGui::End();
}

}  // namespace castscope::gui
