// Matmul panel: tensor-core GEMMs (BF16, FP8, FP8 with block scales, TCFP-12, TCFP-16) at chosen
// sizes, with TFLOP/s and the error against an fp64 reference; without a usable GPU it says why.
#include <imgui.h>

#include "panels.hpp"

namespace castscope::gui {

void draw_matmul_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Matmul, "Matmul", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  save_view_button(app, PanelId::Matmul);
  static std::string reason;
  static int checked =
      0;  // 0 unknown, 1 available, 2 unavailable; asked once: it probes the driver
  // Asking before the background start is done would block this frame until the context is up.
  if (!checked && gpu_starting()) {
    ImGui::TextDisabled("Starting the GPU...");
    ImGui::End();
    return;
  }
  if (!checked) checked = gemm_available(&reason) ? 1 : 2;
  if (checked == 2) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.7f, 0.3f, 1.0f));
    ImGui::TextWrapped("GEMMs are unavailable here: %s", reason.c_str());
    ImGui::PopStyleColor();
    ImGui::Spacing();
    ImGui::TextWrapped(
        "The matmul panel runs cuBLASLt tensor-core GEMMs and needs a CastScope build with the "
        "CUDA backend "
        "(-DCASTSCOPE_CUDA=ON, nvcc installed) and an NVIDIA GPU with FP8 tensor cores (Hopper or "
        "newer). "
        "Everything else in the app works on the CPU; the cast results are identical on both "
        "backends.");
    const BackendInfo b = backend_info();
    ImGui::Spacing();
    ImGui::Text("CUDA backend built: %s", b.cuda_built ? "yes" : "no");
    ImGui::Text("GPU available: %s%s%s", b.cuda_available ? "yes" : "no",
                b.device_name.empty() ? "" : " - ", b.device_name.c_str());
    if (!b.reason.empty()) ImGui::TextWrapped("backend: %s", b.reason.c_str());
    ImGui::Separator();
  }
  const bool running = app.gemm_job.running();
  ImGui::BeginDisabled(running || checked == 2);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  ImGui::InputInt("M", &app.gemm_m, 0);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  ImGui::InputInt("N", &app.gemm_n, 0);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  ImGui::InputInt("K", &app.gemm_k, 0);
  app.gemm_m = std::clamp(app.gemm_m, 16, 65536);
  app.gemm_n = std::clamp(app.gemm_n, 16, 65536);
  app.gemm_k = std::clamp(app.gemm_k, 16, 65536);
  const char* names[] = {"BF16", "FP8", "FP8 block", "TCFP-12", "TCFP-16"};
  for (int i = 0; i < 5; ++i) {
    if (i) ImGui::SameLine();
    ImGui::Checkbox(names[i], &app.gemm_kinds[i]);
  }
  if (ImGui::Button("Run")) start_gemm(app);
  ImGui::EndDisabled();
  if (checked == 2) {
    // A control that cannot act says why, next to it and on hover.
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("Disabled: %s", reason.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("(disabled: needs a CUDA build and an NVIDIA GPU)");
  }
  job_line(app.gemm_job);
  if (!app.gemm_error.empty()) error_text(app.gemm_error);
  if (const GemmRun* g = app.gemm.get()) {
    for (const std::string& e : g->errors) error_text(e);
    if (ImGui::BeginTable("##gemm", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) {
      for (const char* h : {"kind", "M x N x K", "ms", "TFLOP/s", "rel. error", "note"})
        ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const GemmResult& r : g->results) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(to_string(r.kind));
        ImGui::TableNextColumn();
        ImGui::Text("%d x %d x %d", r.m, r.n, r.k);
        ImGui::TableNextColumn();
        ImGui::Text("%.3f", r.ms);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f", r.tflops);
        ImGui::TableNextColumn();
        ImGui::Text("%.3e", r.rel_error);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r.note.c_str());
      }
      ImGui::EndTable();
    }
  }
  ImGui::End();
}

}  // namespace castscope::gui
