// Teaching view: for a format of at most 8 bits, the number line of every representable value,
// with the current tile's elements (divided by the tile's scale) placed on it and an arrow from
// each input to the value it rounds to.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "castscope/widgets/tile_clipped.hpp"
#include "panels.hpp"

namespace castscope::gui {

namespace {

struct Element {
  int64_t index;
  float x, q;
  double xs, qs;  // divided by the tile's scale
};

// Position on the axis in [0, 1]: by rank (equal spacing per representable value) or by value.
double axis_pos(const std::vector<double>& g, double v, bool linear) {
  const double lo = g.front(), hi = g.back();
  if (linear) return (v - lo) / (hi - lo);
  const double n = static_cast<double>(g.size() - 1);
  if (v <= lo) return (v - lo) / (g[1] - g[0]) / n;
  if (v >= hi) return 1.0 + (v - hi) / (hi - g[g.size() - 2]) / n;
  const size_t i = static_cast<size_t>(std::upper_bound(g.begin(), g.end(), v) - g.begin()) - 1;
  const double f = (v - g[i]) / (g[i + 1] - g[i]);
  return (static_cast<double>(i) + f) / n;
}

}  // namespace

void draw_teach_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Teach, "Teaching view", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  save_view_button(app, PanelId::Teach);
  const widgets::Analysis* a = app.analysis.get();
  if (!a || !a->input) {
    ImGui::TextDisabled("waiting for a cast");
    ImGui::End();
    return;
  }
  const DataType& d = a->dtype;
  const FamilyTraits& fam = family_traits(d.family());
  const bool plain = fam.tensorcast_layout;
  if (!plain || d.number().bits() > 8 || d.number().is_exponent()) {
    ImGui::TextWrapped(
        "The teaching view shows formats of at most 8 bits; %s has %d-bit elements%s. Pick e.g. "
        "mxfp4e2, nvfp4, mxfp8e4 or int4_sc in the composer.",
        d.label().c_str(), d.number().bits(),
        plain ? "" : (std::string(" (a ") + fam.kind + " format)").c_str());
    ImGui::End();
    return;
  }
  const NumberSpec& f = d.number();
  std::vector<double> grid;
  for (const CodeValue& cv : f.enumerate())
    if (std::isfinite(cv.value)) grid.push_back(cv.value);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  if (grid.size() < 2) {
    ImGui::TextDisabled("format has fewer than two finite values");
    ImGui::End();
    return;
  }

  // The tile's elements and scale, on the tensor's view [outputs, reduction] as the tile map.
  const int64_t R = a->view.rows, C = a->view.cols;
  int64_t tiles = 0, tr = 1, tc = std::min<int64_t>(C, 32), cols = (C + tc - 1) / tc;
  const TileMap* m = a->tiles ? &*a->tiles : nullptr;
  if (m)
    tiles = m->rows * m->cols, tr = m->tile_rows, tc = m->tile_cols, cols = m->cols;
  else
    tiles = ((R + tr - 1) / tr) * cols;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  ImGui::InputInt("tile", &app.teach_tile);
  app.teach_tile =
      static_cast<int>(std::clamp<int64_t>(app.teach_tile, 0, std::max<int64_t>(0, tiles - 1)));
  ImGui::SameLine();
  ImGui::Checkbox("linear axis", &app.teach_linear);
  const int64_t k = app.teach_tile, row0 = (k / cols) * tr, col0 = (k % cols) * tc;
  // The elements are divided by the whole scale the cast divided them by: the tile's scale
  // times the tensor scale of a two-level datatype (NVFP4's float32 scale), so they land on the
  // element grid as the cast placed them.
  double tile_scale = 1.0, tensor_scale = 1.0;
  if (m) tile_scale = m->scale_value[k];
  if (!(tile_scale > 0) || !std::isfinite(tile_scale)) tile_scale = 1.0;
  if (std::isfinite(a->tensor_scale) && a->tensor_scale > 0) tensor_scale = a->tensor_scale;
  const double scale = tile_scale * tensor_scale;
  if (app.teach_block_of != app.analyses_done || app.teach_block_tile != k) {
    try {
      app.teach_block = widgets::values_block(*a, row0, col0, tr, tc);
    } catch (const Error& e) {
      app.teach_block = Tensor();
      app.note(std::string("teaching view: ") + e.what());
    }
    app.teach_block_of = app.analyses_done;
    app.teach_block_tile = k;
  }
  if (!app.teach_block) {
    ImGui::TextDisabled("the tile's cast values could not be read");
    ImGui::End();
    return;
  }
  std::vector<Element> el;
  const float* xp = a->input.ptr<float>();
  const float* qp = app.teach_block.ptr<float>();
  const int64_t bw = app.teach_block.shape()[1];
  for (int64_t r = row0; r < std::min(R, row0 + tr); ++r)
    for (int64_t c = col0; c < std::min(C, col0 + tc); ++c) {
      const int64_t i = a->view.at(r, c);
      const float q = qp[(r - row0) * bw + (c - col0)];
      if (el.size() < 64) el.push_back({i, xp[i], q, xp[i] / scale, q / scale});
    }
  // An integer element under a float scale is cast on its integer grid (the codes themselves),
  // which the format's fixed-point values are a fraction of: put the line in the cast's units.
  if (const double ratio = widgets::clip_grid_max(d) / grid.back(); ratio != 1.0 && ratio > 0)
    for (double& g : grid) g *= ratio;
  // Integer element formats of MX-style datatypes are fixed point: their codes stand for
  // q / 2^(bits-2). Use whichever grid the cast values actually sit on.
  if (f.is_int() && d.scaled() && d.scale()->scale.is_exponent()) {
    const double fp = std::exp2(f.bits() - 2);
    double off_int = 0, off_fix = 0;
    for (const Element& e : el) {
      off_int += std::fabs(e.qs - std::round(e.qs));
      off_fix += std::fabs(e.qs * fp - std::round(e.qs * fp));
    }
    if (off_fix < off_int)
      for (double& g : grid) g /= fp;
  }
  // Clipped: x / scale saturates once rounded (the engine's quantizer decides, as for the tile
  // map's count and the cast's statistics), on the grid the cast rounds on.
  const double unit = widgets::clip_grid_max(d) / grid.back();
  std::vector<char> clipped_el(el.size());
  int64_t clipped_n = 0;
  for (size_t i = 0; i < el.size(); ++i)
    clipped_n += clipped_el[i] =
        widgets::clips_after_rounding(d, a->options.round, el[i].xs * unit);
  AppState::TeachShown& shown = app.teach_shown;
  shown = {};
  shown.tile = k;
  shown.scale = scale;
  shown.tensor_scale = tensor_scale;
  shown.grid = grid;
  for (const Element& e : el) shown.xs.push_back(e.xs), shown.qs.push_back(e.qs);
  shown.clipped = clipped_n;
  if (static_cast<size_t>(k) < a->tile_clipped.size()) shown.tile_clipped = a->tile_clipped[k];
  char scale_buf[160];
  if (tensor_scale != 1.0 || d.multiscale())
    std::snprintf(scale_buf, sizeof scale_buf,
                  "scale %.6g = tile scale %.6g x tensor scale %.6g (the axis is in its units)",
                  scale, tile_scale, tensor_scale);
  else
    std::snprintf(scale_buf, sizeof scale_buf, "scale %.6g", scale);
  const std::string scale_text = scale_buf;
  ImGui::TextWrapped("%s: %zu finite values in [%g, %g]; tile %lld (rows %lld.., cols %lld..), %s",
                     f.name().c_str(), grid.size(), grid.front(), grid.back(),
                     static_cast<long long>(k), static_cast<long long>(row0),
                     static_cast<long long>(col0), scale_text.c_str());
  ImGui::Text("clipped in this tile: %lld%s", static_cast<long long>(clipped_n),
              el.size() < static_cast<size_t>(tr * tc) ? " (of the elements shown)" : "");

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float h = std::max(fs * 12, avail.y * 0.5f);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("line", ImVec2(avail.x, h));
  const bool hovered = ImGui::IsItemHovered();
  dl->AddRectFilled(p0, ImVec2(p0.x + avail.x, p0.y + h), ImGui::GetColorU32(ImGuiCol_FrameBg), 3);
  const float x0 = p0.x + fs * 2, x1 = p0.x + avail.x - fs * 3;
  const float ly = p0.y + h - fs * 3;
  auto X = [&](double v) {
    return static_cast<float>(x0 + axis_pos(grid, v, app.teach_linear) * (x1 - x0));
  };
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text),
              axis = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  dl->AddLine(ImVec2(x0 - fs, ly), ImVec2(x1 + fs, ly), axis, 1.5f);
  float last_label = -1e9f;
  for (size_t i = 0; i < grid.size(); ++i) {
    const float x = X(grid[i]);
    dl->AddLine(ImVec2(x, ly - fs * 0.4f), ImVec2(x, ly + fs * 0.4f), axis, 1.0f);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", grid[i]);
    const float w = ImGui::CalcTextSize(buf).x;
    if (x - w / 2 > last_label + 6 || i + 1 == grid.size()) {
      dl->AddText(ImVec2(x - w / 2, ly + fs * 0.5f), text, buf);
      last_label = x + w / 2;
    }
  }
  const Element* hover = nullptr;
  const float top = p0.y + fs * 0.8f, span = ly - fs * 1.5f - top;
  for (size_t i = 0; i < el.size(); ++i) {
    const Element& e = el[i];
    if (!std::isfinite(e.xs)) continue;
    const float y = top + span * static_cast<float>(i % 8) / 8.0f;
    const float xi = X(e.xs), xq = X(e.qs);
    const bool clipped = clipped_el[i];
    const bool exact = e.xs == e.qs;
    const ImU32 c = exact                    ? IM_COL32(90, 200, 120, 255)
                    : clipped                ? IM_COL32(235, 80, 70, 255)
                    : e.qs == 0 && e.xs != 0 ? IM_COL32(150, 150, 160, 255)
                                             : IM_COL32(245, 160, 40, 255);
    dl->AddLine(ImVec2(xi, y), ImVec2(xq, ly - 2), c, 1.2f);
    dl->AddCircleFilled(ImVec2(xq, ly), fs * 0.22f, c);
    dl->AddCircleFilled(ImVec2(xi, y), fs * 0.28f, c);
    if (hovered &&
        std::hypot(ImGui::GetIO().MousePos.x - xi, ImGui::GetIO().MousePos.y - y) < fs * 0.5f)
      hover = &e;
  }
  if (hover)
    ImGui::SetTooltip(
        "element %lld\nx = %.9g  (x / scale = %.9g)\nrounds to %.9g  (cast value %.9g)\nerror "
        "%.3g%s",
        static_cast<long long>(hover->index), hover->x, hover->xs, hover->qs, hover->q,
        static_cast<double>(hover->q) - hover->x,
        clipped_el[static_cast<size_t>(hover - el.data())]
            ? "\nclipped: past the largest value once rounded"
            : "");
  ImGui::TextColored(ImVec4(0.35f, 0.8f, 0.47f, 1), "exact");
  ImGui::SameLine();
  ImGui::TextColored(ImVec4(0.96f, 0.63f, 0.16f, 1), "rounded");
  ImGui::SameLine();
  ImGui::TextColored(ImVec4(0.92f, 0.31f, 0.27f, 1), "clipped (saturated)");
  ImGui::SameLine();
  ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.63f, 1), "flushed to zero");
  if (d.codebook()) draw_codebook_mappings(*a, k, X, x0, x1);
  {
    std::vector<int64_t> idx;
    for (const Element& e : el) idx.push_back(e.index);
    draw_teach_method(app, *a, idx);
  }
  if (ImGui::BeginTable(
          "##teach", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* hname : {"element", "x", "x / scale", "rounded / scale", "error"})
      ImGui::TableSetupColumn(hname);
    ImGui::TableHeadersRow();
    for (const Element& e : el) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(e.index));
      ImGui::TableNextColumn();
      ImGui::Text("%.6g", e.x);
      ImGui::TableNextColumn();
      ImGui::Text("%.6g", e.xs);
      ImGui::TableNextColumn();
      ImGui::Text("%.6g", e.qs);
      ImGui::TableNextColumn();
      ImGui::Text("%.3g", static_cast<double>(e.q) - e.x);
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace castscope::gui
