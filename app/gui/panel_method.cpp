// The quantization method in the composer (method, its options, calibration inputs) and round to
// nearest beside the method in the Views and in Compare: weight SNR and the layer output error
// on the calibration, as the method job computed them (actions_method.cpp).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "panels.hpp"

namespace castscope::gui {

namespace {

// The method's result for the loaded tensor and the composer's datatype, else null.
const MethodRun* current_run(const AppState& app) {
  const MethodRun* r = app.method_run.get();
  if (!r || app.method.opt.method == Method::RTN || !app.loaded ||
      r->tensor != app.loaded->tensor || r->method != to_string(app.method.opt.method) ||
      r->rows.empty() || r->rows[0].dtype != app.composer.dtype.str())
    return nullptr;
  return r;
}

void snr_cell(double snr) {
  ImGui::Text(std::isinf(snr) ? "exact" : "%.3f", snr);
}

}  // namespace

void draw_method_controls(AppState& app) {
  MethodSettings& s = app.method;
  MethodOptions& m = s.opt;
  ImGui::BeginDisabled(app.composer.disabled);
  const char* names[] = {"rtn", "gptq", "mse", "awq"};
  int sel = static_cast<int>(m.method);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  if (ImGui::Combo("method", &sel, names, 4)) m.method = static_cast<Method>(sel);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "how the weight's codes and scales are chosen (docs/formats.md, Methods):\n"
        "rtn: round to nearest, the cast itself\n"
        "gptq: column by column, errors fed forward through the calibration Hessian\n"
        "mse: each group's scale searched; four over six for NVFP4\n"
        "awq: a scale per input channel searched on the calibration");
  if (m.method == Method::GPTQ) {
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
    if (ImGui::InputDouble("damping", &m.damp, 0, 0, "%.4g", ImGuiInputTextFlags_EnterReturnsTrue))
      m.damp = std::clamp(m.damp, 0.0, 1e6);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
    if (ImGui::InputInt("block size", &m.block, 0, 0, ImGuiInputTextFlags_EnterReturnsTrue))
      m.block = std::max(m.block, 1);
    ImGui::Checkbox("act-order", &m.act_order);
    ImGui::SameLine();
    ImGui::Checkbox("static groups", &m.static_groups);
  } else if (m.method == Method::MSE) {
    ImGui::Checkbox("four over six (NVFP4)", &m.four_over_six);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("each NVFP4 block maps its absmax onto 6 or onto 4, whichever errs less");
  }
  if (m.method != Method::RTN) {
    // Calibration: inputs of this weight [tokens, in], or the activations panel's generator.
    ImGui::SetNextItemWidth(-ImGui::CalcTextSize("calibration").x -
                            ImGui::GetStyle().ItemInnerSpacing.x * 2);
    if (ImGui::InputTextWithHint("calibration", ".npy, empty: synthetic", s.calib_edit,
                                 sizeof s.calib_edit, ImGuiInputTextFlags_EnterReturnsTrue))
      std::memcpy(s.calib_path, s.calib_edit, sizeof s.calib_path);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "a .npy of activations of the loaded tensor [tokens, in] (press Enter);\nempty: "
          "synthetic "
          "tokens, N(0, 1) with outlier channels, from the seed");
    if (!s.calib_path[0]) {
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4);
      ImGui::InputInt("tokens##calib", &s.calib_tokens, 0, 0, ImGuiInputTextFlags_EnterReturnsTrue);
      ImGui::SameLine();
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 3);
      ImGui::InputInt("seed##calib", &s.calib_seed, 0, 0, ImGuiInputTextFlags_EnterReturnsTrue);
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4);
      ImGui::InputInt("outliers##calib", &s.calib_outliers, 0, 0,
                      ImGuiInputTextFlags_EnterReturnsTrue);
      ImGui::SameLine();
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 3);
      ImGui::InputFloat("scale##calib", &s.calib_outlier_scale, 0, 0, "%.1f",
                        ImGuiInputTextFlags_EnterReturnsTrue);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("outlier channels scaled by this factor");
      s.calib_tokens = std::clamp(s.calib_tokens, 1, 65536);
      s.calib_outliers = std::max(s.calib_outliers, 0);
    }
  }
  ImGui::EndDisabled();
  if (m.method != Method::RTN) {
    job_line(app.method_job);
    if (!app.method_error.empty()) error_text(app.method_error);
  }
}

void draw_method_summary(AppState& app) {
  if (app.method.opt.method == Method::RTN) return;
  const char* mname = to_string(app.method.opt.method);
  const MethodRun* r = current_run(app);
  if (!r) {
    if (!app.method_error.empty())
      error_text(app.method_error);
    else
      ImGui::TextDisabled("%s beside round to nearest: computing...", mname);
    return;
  }
  const MethodRow& row = r->rows[0];
  if (!row.error.empty()) {
    error_text(std::string(mname) + " on " + row.dtype + ": " + row.error);
    return;
  }
  ImGui::TextDisabled("%s beside rtn on %lld calibration tokens (%s)", mname,
                      static_cast<long long>(r->tokens), r->calib.c_str());
  if (ImGui::BeginTable("##method", 4, ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg)) {
    for (const char* h : {"method", "weight SNR (dB)", "output rel. error", "output error"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (int k = 0; k < 2; ++k) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k ? mname : "rtn");
      ImGui::TableNextColumn();
      snr_cell(k ? row.method.snr_db : row.rtn.snr_db);
      ImGui::TableNextColumn();
      ImGui::Text("%.5g", k ? row.method_out_relerr : row.rtn_out_relerr);
      ImGui::TableNextColumn();
      if (k && row.method_output_error > 0)
        ImGui::Text("%.6g", row.method_output_error);
      else
        ImGui::TextDisabled("-");
    }
    ImGui::EndTable();
  }
}

void draw_method_compare(AppState& app) {
  if (app.method.opt.method == Method::RTN || app.pinned.empty()) return;
  const char* mname = to_string(app.method.opt.method);
  const MethodRun* r = app.method_run.get();
  ImGui::Text("round to nearest beside %s", mname);
  if (!r || r->method != mname || !app.loaded || r->tensor != app.loaded->tensor) {
    ImGui::SameLine();
    ImGui::TextDisabled(app.method_job.running() ? "computing..." : "");
    job_line(app.method_job);
    return;
  }
  job_line(app.method_job);
  const float h = std::min(ImGui::GetContentRegionAvail().y * 0.35f,
                           ImGui::GetFrameHeightWithSpacing() * (r->rows.size() + 1.5f));
  if (ImGui::BeginTable(
          "##cmpmethod", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY,
          ImVec2(0, h))) {
    ImGui::TableSetupColumn("datatype", ImGuiTableColumnFlags_WidthStretch);
    const std::string snr_m = std::string("SNR ") + mname, err_m = std::string("out err ") + mname;
    for (const char* c : {"SNR rtn", snr_m.c_str(), "out err rtn", err_m.c_str()})
      ImGui::TableSetupColumn(c, ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    for (const MethodRow& row : r->rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(fit_text(row.name, ImGui::GetContentRegionAvail().x).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s%s%s", row.dtype.c_str(), row.error.empty() ? "" : "\n",
                          row.error.c_str());
      if (!row.error.empty()) {
        ImGui::TableNextColumn();
        ImGui::TextDisabled("refused");
        continue;
      }
      ImGui::TableNextColumn();
      snr_cell(row.rtn.snr_db);
      ImGui::TableNextColumn();
      snr_cell(row.method.snr_db);
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", row.rtn_out_relerr);
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", row.method_out_relerr);
    }
    ImGui::EndTable();
  }
}

}  // namespace castscope::gui
