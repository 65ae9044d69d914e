// Export dialog: layout, output path, progress with time remaining, cancel, and the verified
// summary of what was written (every exporter reads its file back before renaming it in place).
#include <imgui.h>

#include "panels.hpp"

namespace castscope::gui {

void draw_export_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Export, "Export", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  if (!app.model) {
    ImGui::TextDisabled("open a model");
    ImGui::End();
    return;
  }
  save_view_button(app, PanelId::Export);
  const bool running = app.export_job.running();
  ImGui::BeginDisabled(running);
  ImGui::Combo("layout", &app.export_layout,
               "native (CastScope packed safetensors)\0gpt-oss MXFP4\0compressed-tensors\0GGUF\0");
  ImGui::InputText("output", app.export_path, sizeof app.export_path);
  ImGui::Text("plan: %zu rules, default %s", app.plan.rules.size(), app.plan.default_text.c_str());
  if (const PlanResult* p = app.plan_eval.get())
    ImGui::Text("expected size %s -> %s, %.3f bits per value",
                human_bytes(static_cast<double>(p->bytes_in)).c_str(),
                human_bytes(static_cast<double>(p->bytes_out)).c_str(), p->avg_bits);
  if (ImGui::Button("Export")) start_export(app);
  ImGui::EndDisabled();
  if (running) {
    const double p = app.export_job.progress(), t = app.export_job.elapsed_s();
    char buf[96];
    if (p > 0.01)
      std::snprintf(buf, sizeof buf, "%.0f%%   %.1f s elapsed, about %.1f s left", 100 * p, t,
                    t * (1 - p) / p);
    else
      std::snprintf(buf, sizeof buf, "starting (%.1f s)", t);
    ImGui::ProgressBar(static_cast<float>(p), ImVec2(-ImGui::GetFontSize() * 6, 0), buf);
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) app.export_job.cancel();
  }
  if (!app.export_error.empty()) error_text("export failed, nothing written: " + app.export_error);
  if (const ExportDone* d = app.export_done.get()) {
    const ExportReport& r = d->report;
    ImGui::Separator();
    ImGui::TextColored(ImVec4(0.4f, 0.85f, 0.5f, 1),
                       "verified: every file was read back and checked before it was "
                       "moved into place");
    ImGui::Text("%zu tensors, %s -> %s (%.1f%%) in %.2f s", r.tensors.size(),
                human_bytes(static_cast<double>(r.bytes_in)).c_str(),
                human_bytes(static_cast<double>(r.bytes_out)).c_str(),
                r.bytes_in ? 100.0 * r.bytes_out / r.bytes_in : 0.0, d->seconds);
    for (const std::string& f : r.files) {
      ImGui::Bullet();
      name_text(f);
    }
    if (ImGui::BeginTable(
            "##exp", 4,
            ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("tensor", ImGuiTableColumnFlags_WidthStretch);
      for (const char* h : {"datatype", "in", "out"})
        ImGui::TableSetupColumn(h, ImGuiTableColumnFlags_WidthFixed);
      ImGui::TableHeadersRow();
      for (const ExportedTensor& t : r.tensors) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        name_text(t.name);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(t.dtype.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(human_bytes(static_cast<double>(t.bytes_in)).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(human_bytes(static_cast<double>(t.bytes_out)).c_str());
      }
      ImGui::EndTable();
    }
  }
  ImGui::End();
}

}  // namespace castscope::gui
