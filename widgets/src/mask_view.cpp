#include "castscope/widgets/mask_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "castscope/widgets/grid_image.hpp"

namespace castscope::widgets {

namespace {

uint32_t mask_colour(float fraction) {
  const int v = static_cast<int>(40 + 215 * fraction);
  return fraction > 0 ? IM_COL32(v, v / 2 + 60, 40, 255) : IM_COL32(24, 28, 40, 255);
}

}  // namespace

void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size,
                    const MaskDetail& detail) {
  ImGui::PushID(id);
  const float y_start = ImGui::GetCursorPosY();
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetContentRegionAvail().y;
  s.hover_row = s.hover_col = s.hover_elem_row = s.hover_elem_col = -1;
  s.drawn = false;
  if (m.out_rows <= 0 || m.out_cols <= 0) {
    ImGui::TextDisabled("%s: empty", m.what.c_str());
    ImGui::PopID();
    return;
  }
  if (ImGui::SmallButton("reset view")) s.view = GridView{};
  ImGui::SameLine();
  {
    // One line beside the button: the full summary where it fits, else shorter forms, the full
    // one in the tooltip (a wrapped second line pushed the image past a small cell).
    const double pct = m.total ? 100.0 * m.set / m.total : 0.0;
    char full[256], mid[160], low[64];
    std::snprintf(full, sizeof full, "%s: %lld of %lld (%.3f%%)", m.what.c_str(),
                  static_cast<long long>(m.set), static_cast<long long>(m.total), pct);
    std::snprintf(mid, sizeof mid, "%lld of %lld (%.3g%%)", static_cast<long long>(m.set),
                  static_cast<long long>(m.total), pct);
    std::snprintf(low, sizeof low, "%.3g%%", pct);
    const float room = ImGui::GetContentRegionAvail().x;
    const char* show = ImGui::CalcTextSize(full).x <= room  ? full
                       : ImGui::CalcTextSize(mid).x <= room ? mid
                                                            : low;
    ImGui::TextUnformatted(show);
    if (show != full && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", full);
  }
  size.y -= ImGui::GetCursorPosY() - y_start;
  if (s.source != &m) {
    std::vector<uint32_t> px(m.fraction.size());
    for (size_t k = 0; k < px.size(); ++k) px[k] = mask_colour(m.fraction[k]);
    s.tex.upload(px, static_cast<int>(m.out_cols), static_cast<int>(m.out_rows));
    s.source = &m;
  }
  GridGeom g;
  g.rows = m.out_rows;
  g.cols = m.out_cols;
  g.cell_rows = m.cell_rows;
  g.cell_cols = m.cell_cols;
  g.elem_rows = m.rows;
  g.elem_cols = m.cols;
  // The visible elements, when few enough to show one by one.
  auto overlay = [&](ImDrawList* dl, const GridImage& gi) {
    s.detail_shown = false;
    if (!detail || (m.cell_rows == 1 && m.cell_cols == 1)) return;
    const double ec = static_cast<double>(g.cols * g.cell_cols),
                 er = static_cast<double>(g.rows * g.cell_rows);
    const int64_t c0 = static_cast<int64_t>(std::floor(s.view.u0 * ec)),
                  r0 = static_cast<int64_t>(std::floor(s.view.v0 * er));
    const int64_t c1 = std::min<int64_t>(
                      m.cols, static_cast<int64_t>(std::ceil((s.view.u0 + 1 / s.view.zx) * ec))),
                  r1 = std::min<int64_t>(
                      m.rows, static_cast<int64_t>(std::ceil((s.view.v0 + 1 / s.view.zy) * er)));
    const int64_t w = c1 - c0, h = r1 - r0;
    if (w <= 0 || h <= 0 || w > kMaskDetailSide || h > kMaskDetailSide) return;
    const int64_t key[5] = {reinterpret_cast<intptr_t>(&m), r0, c0, h, w};
    if (!std::equal(key, key + 5, s.detail_key)) {
      std::copy(key, key + 5, s.detail_key);
      s.detail.clear();
      if (detail(r0, c0, h, w, &s.detail) && s.detail.size() == static_cast<size_t>(h * w)) {
        std::vector<uint32_t> px(s.detail.size());
        for (size_t k = 0; k < px.size(); ++k) px[k] = mask_colour(s.detail[k] ? 1.0f : 0.0f);
        if (!s.detail_tex.upload(px, static_cast<int>(w), static_cast<int>(h))) s.detail.clear();
      } else {
        s.detail.clear();
      }
    }
    if (s.detail.empty() || !s.detail_tex.valid()) return;
    float x0, y0, x1, y1;
    grid_to_pixels(s.view, gi.g, static_cast<double>(c0) / g.cell_cols,
                   static_cast<double>(r0) / g.cell_rows, &x0, &y0);
    grid_to_pixels(s.view, gi.g, static_cast<double>(c1) / g.cell_cols,
                   static_cast<double>(r1) / g.cell_rows, &x1, &y1);
    dl->AddImage(s.detail_tex.id(), ImVec2(gi.p0.x + x0, gi.p0.y + y0),
                 ImVec2(gi.p0.x + x1, gi.p0.y + y1));
    s.detail_shown = true;
  };
  const GridImage im =
      draw_grid_image("mask", s.view, s.drag_px, s.tex, g,
                      ImVec2(std::max(size.x, 60.0f), std::max(size.y, 40.0f)), overlay);
  s.screen[0] = im.p0.x;
  s.screen[1] = im.p0.y;
  s.screen[2] = im.g.width;
  s.screen[3] = im.g.height;
  s.drawn = s.tex.valid() && im.g.width >= 1 && im.g.height >= 1;
  if (im.hit) {
    const int64_t r = im.hit->row, c = im.hit->col;
    s.hover_row = r;
    s.hover_col = c;
    s.hover_elem_row = im.hit->elem_row;
    s.hover_elem_col = im.hit->elem_col;
    outline_cell(im, s.view, r, c, IM_COL32(255, 255, 255, 230));
    ImGui::BeginTooltip();
    ImGui::Text("rows %lld..%lld, cols %lld..%lld: %.2f%% %s",
                static_cast<long long>(r * m.cell_rows),
                static_cast<long long>(std::min(m.rows, (r + 1) * m.cell_rows) - 1),
                static_cast<long long>(c * m.cell_cols),
                static_cast<long long>(std::min(m.cols, (c + 1) * m.cell_cols) - 1),
                100.0 * m.fraction[static_cast<size_t>(r * m.out_cols + c)], m.what.c_str());
    if (s.detail_shown) {
      const int64_t dr = im.hit->elem_row - s.detail_key[1],
                    dc = im.hit->elem_col - s.detail_key[2];
      if (dr >= 0 && dc >= 0 && dr < s.detail_key[3] && dc < s.detail_key[4])
        ImGui::Text("element [%lld, %lld]: %s", static_cast<long long>(im.hit->elem_row),
                    static_cast<long long>(im.hit->elem_col),
                    s.detail[static_cast<size_t>(dr * s.detail_key[4] + dc)] ? "set" : "not set");
    } else if (m.cell_rows > 1 || m.cell_cols > 1) {
      ImGui::TextDisabled("one cell per %lld x %lld elements%s",
                          static_cast<long long>(m.cell_rows), static_cast<long long>(m.cell_cols),
                          detail ? "; zoom in for single elements" : "");
    }
    ImGui::TextDisabled("wheel: zoom   drag: pan");
    ImGui::EndTooltip();
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
