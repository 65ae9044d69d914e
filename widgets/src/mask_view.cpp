#include "castscope/widgets/mask_view.hpp"

#include <algorithm>

namespace castscope::widgets {

void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size) {
  ImGui::PushID(id);
  ImGui::Text("%s: %lld of %lld (%.3f%%)", m.what.c_str(), static_cast<long long>(m.set),
              static_cast<long long>(m.total), m.total ? 100.0 * m.set / m.total : 0.0);
  if (m.out_rows <= 0 || m.out_cols <= 0) {
    ImGui::TextDisabled("empty");
    ImGui::PopID();
    return;
  }
  if (s.source != &m) {
    std::vector<uint32_t> px(m.fraction.size());
    for (size_t k = 0; k < px.size(); ++k) {
      const int v = static_cast<int>(40 + 215 * m.fraction[k]);
      px[k] = m.fraction[k] > 0 ? IM_COL32(v, v / 2 + 60, 40, 255) : IM_COL32(24, 28, 40, 255);
    }
    s.tex.upload(px, static_cast<int>(m.out_cols), static_cast<int>(m.out_rows));
    s.source = &m;
  }
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetContentRegionAvail().y;
  float w = size.x, h = size.x * static_cast<float>(m.rows) / static_cast<float>(m.cols);
  if (h > size.y)
    h = std::max(size.y, 8.0f), w = h * static_cast<float>(m.cols) / static_cast<float>(m.rows);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::Image(s.tex.id(), ImVec2(w, h));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int64_t c = std::clamp<int64_t>(static_cast<int64_t>((mp.x - p0.x) / w * m.out_cols), 0,
                                          m.out_cols - 1);
    const int64_t r = std::clamp<int64_t>(static_cast<int64_t>((mp.y - p0.y) / h * m.out_rows), 0,
                                          m.out_rows - 1);
    ImGui::SetTooltip("rows %lld..%lld, cols %lld..%lld: %.2f%% set",
                      static_cast<long long>(r * m.cell_rows),
                      static_cast<long long>(std::min(m.rows, (r + 1) * m.cell_rows) - 1),
                      static_cast<long long>(c * m.cell_cols),
                      static_cast<long long>(std::min(m.cols, (c + 1) * m.cell_cols) - 1),
                      100.0 * m.fraction[static_cast<size_t>(r * m.out_cols + c)]);
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
