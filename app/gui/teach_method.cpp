// Part of the teaching view for a GPTQ tile: per element the code GPTQ chose beside the nearest
// code on the same scales (the cast of the original weight onto GPTQ's scales), the ones GPTQ
// moved marked, and how many it moved in the tile and in the tensor.
#include <imgui.h>

#include <cstdio>

#include "panels.hpp"

namespace castscope::gui {

namespace {

// "code 5: -1.5", or the value alone where the datatype stores no code per element.
std::string code_text(const Tensor& codes, const Tensor& values, int64_t i) {
  char buf[64];
  const float v = values.ptr<float>()[i];
  if (codes && codes.numel() == values.numel() && codes.dtype() == DType::U8)
    std::snprintf(buf, sizeof buf, "%u: %.5g", static_cast<unsigned>(codes.ptr<uint8_t>()[i]), v);
  else
    std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

}  // namespace

void draw_teach_method(AppState& app, const widgets::Analysis& a, const std::vector<int64_t>& idx) {
  AppState::TeachShown& shown = app.teach_shown;
  if (app.method.opt.method != Method::GPTQ) return;
  const MethodRun* r = app.method_run.get();
  if (!r || r->tensor != a.tensor || r->rows.empty() || r->rows[0].dtype != a.dtype.str() ||
      r->method != "gptq") {
    ImGui::TextDisabled("gptq's codes: computing...");
    return;
  }
  const MethodRow& row = r->rows[0];
  if (!row.error.empty() || !row.values || !row.nearest || row.values.numel() != a.input.numel()) {
    ImGui::TextDisabled("gptq's codes are not available for this tensor");
    return;
  }
  const float* q = row.values.ptr<float>();
  const float* n = row.nearest.ptr<float>();
  int64_t moved = 0;
  for (int64_t i : idx) {
    moved += q[i] != n[i];
    shown.method_q.push_back(q[i]);
    shown.nearest_q.push_back(n[i]);
    shown.elements.push_back(i);
  }
  shown.moved = moved;
  shown.moved_total = row.moved;
  ImGui::Separator();
  ImGui::TextWrapped(
      "gptq moved %lld of the %zu codes shown off the nearest one (%lld of %lld in the tensor), "
      "on gptq's own scales",
      static_cast<long long>(moved), idx.size(), static_cast<long long>(row.moved),
      static_cast<long long>(row.values.numel()));
  const float h = ImGui::GetContentRegionAvail().y * 0.5f;
  if (ImGui::BeginTable(
          "##teachgptq", 4,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV,
          ImVec2(0, h))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* c : {"element", "nearest code", "gptq code", "moved"})
      ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (int64_t i : idx) {
      const bool differs = q[i] != n[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(i));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(code_text(row.nearest_codes, row.nearest, i).c_str());
      ImGui::TableNextColumn();
      if (differs) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.6f, 0.2f, 1));
      ImGui::TextUnformatted(code_text(row.codes, row.values, i).c_str());
      if (differs) ImGui::PopStyleColor();
      ImGui::TableNextColumn();
      if (differs) ImGui::TextColored(ImVec4(1, 0.6f, 0.2f, 1), "moved");
    }
    ImGui::EndTable();
  }
}

}  // namespace castscope::gui
