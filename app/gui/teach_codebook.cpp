// Teaching view, codebook part: the mappings of a codebook datatype drawn on the compute format's
// number line, one row each, in the colours the heatmap uses; the rows the current tile chose
// are bright and labelled with the subtiles that chose them.
#include <imgui.h>

#include <algorithm>
#include <string>

#include "castscope/widgets/heatmap.hpp"
#include "panels.hpp"

namespace castscope::gui {

void draw_codebook_mappings(const widgets::Analysis& a, int64_t tile,
                            const std::function<float(double)>& X, float x0, float x1) {
  const Codebook& cb = *a.dtype.codebook();
  const TileMap* m = a.tiles ? &*a.tiles : nullptr;
  std::vector<std::string> chosen(cb.maps.size());
  if (m && m->subs_per_tile > 0 &&
      (tile + 1) * m->subs_per_tile <= static_cast<int64_t>(m->sub_mapping.size()))
    for (int j = 0; j < m->subs_per_tile; ++j) {
      const int mi = m->sub_mapping[tile * m->subs_per_tile + j];
      if (mi < static_cast<int>(chosen.size()))
        chosen[mi] += (chosen[mi].empty() ? "" : ",") + std::to_string(j);
    }
  ImGui::Spacing();
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled(
      "%s: %d mappings of %d entries on the %s line; bright rows are the ones tile "
      "%lld chose (subtile numbers on the right)",
      cb.str().c_str(), cb.num_maps(), cb.num_values(), cb.compute.name().c_str(),
      static_cast<long long>(tile));
  ImGui::PopTextWrapPos();
  const float fs = ImGui::GetFontSize(), row_h = fs * 0.9f;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float h = row_h * static_cast<float>(cb.maps.size()) + fs * 0.5f;
  ImGui::Dummy(ImVec2(x1 - p0.x + fs * 3, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t mi = 0; mi < cb.maps.size(); ++mi) {
    const float y = p0.y + row_h * (static_cast<float>(mi) + 0.5f);
    const bool on = !chosen[mi].empty();
    ImU32 c = widgets::mapping_colour(static_cast<int>(mi));
    if (!on) c = (c & 0x00FFFFFFu) | (70u << 24);  // faded when not chosen
    dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), (c & 0x00FFFFFFu) | (40u << 24), 1.0f);
    for (double v : cb.maps[mi]) {
      const float x = X(v);
      dl->AddLine(ImVec2(x, y - row_h * 0.35f), ImVec2(x, y + row_h * 0.35f), c, on ? 2.5f : 1.0f);
    }
    // The name after the row; moved left over a backing box when the window is too narrow.
    const std::string label = cb.names[mi] + (on ? " <- " + chosen[mi] : "");
    const float lw = ImGui::CalcTextSize(label.c_str()).x;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    const float lx = std::min(x1 + fs * 0.6f, right - lw - fs * 0.2f);
    if (lx < x1 + fs * 0.6f)
      dl->AddRectFilled(ImVec2(lx - 2, y - fs * 0.5f), ImVec2(lx + lw + 2, y + fs * 0.5f),
                        ImGui::GetColorU32(ImGuiCol_WindowBg));
    dl->AddText(ImVec2(lx, y - fs * 0.5f), c, label.c_str());
  }
}

}  // namespace castscope::gui
