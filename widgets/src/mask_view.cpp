#include "castscope/widgets/mask_view.hpp"

#include <algorithm>

#include "castscope/widgets/grid_image.hpp"

namespace castscope::widgets {

void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size) {
  ImGui::PushID(id);
  const float y_start = ImGui::GetCursorPosY();
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetContentRegionAvail().y;
  s.hover_row = s.hover_col = -1;
  if (m.out_rows <= 0 || m.out_cols <= 0) {
    ImGui::TextDisabled("%s: empty", m.what.c_str());
    ImGui::PopID();
    return;
  }
  if (ImGui::SmallButton("reset view")) s.view = GridView{};
  ImGui::SameLine();
  ImGui::TextWrapped("%s: %lld of %lld (%.3f%%)", m.what.c_str(), static_cast<long long>(m.set),
                     static_cast<long long>(m.total), m.total ? 100.0 * m.set / m.total : 0.0);
  size.y -= ImGui::GetCursorPosY() - y_start;
  if (s.source != &m) {
    std::vector<uint32_t> px(m.fraction.size());
    for (size_t k = 0; k < px.size(); ++k) {
      const int v = static_cast<int>(40 + 215 * m.fraction[k]);
      px[k] = m.fraction[k] > 0 ? IM_COL32(v, v / 2 + 60, 40, 255) : IM_COL32(24, 28, 40, 255);
    }
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
  const GridImage im = draw_grid_image(s.view, s.drag_px, s.tex, g,
                                       ImVec2(std::max(size.x, 60.0f), std::max(size.y, 40.0f)));
  if (im.hit) {
    const int64_t r = im.hit->row, c = im.hit->col;
    s.hover_row = r;
    s.hover_col = c;
    outline_cell(im, s.view, r, c, IM_COL32(255, 255, 255, 230));
    ImGui::BeginTooltip();
    ImGui::Text("rows %lld..%lld, cols %lld..%lld: %.2f%% %s",
                static_cast<long long>(r * m.cell_rows),
                static_cast<long long>(std::min(m.rows, (r + 1) * m.cell_rows) - 1),
                static_cast<long long>(c * m.cell_cols),
                static_cast<long long>(std::min(m.cols, (c + 1) * m.cell_cols) - 1),
                100.0 * m.fraction[static_cast<size_t>(r * m.out_cols + c)], m.what.c_str());
    if (m.cell_rows > 1 || m.cell_cols > 1)
      ImGui::TextDisabled("one cell per %lld x %lld elements", static_cast<long long>(m.cell_rows),
                          static_cast<long long>(m.cell_cols));
    ImGui::TextDisabled("wheel: zoom   drag: pan");
    ImGui::EndTooltip();
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
