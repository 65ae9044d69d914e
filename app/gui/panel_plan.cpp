// Per-layer plan: every tensor of the model with the datatype the plan gives it, bits per value,
// SNR and size; rules by name pattern; auto-assignment of the cheapest registry datatype that
// meets an SNR target; the budget planner (panel_plan_budget.cpp); totals; the plan saved and
// loaded as the JSON the CLI reads.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "panels.hpp"

namespace castscope::gui {

void draw_plan_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Plan, "Per-layer plan", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  if (!app.model) {
    ImGui::TextDisabled("open a model");
    ImGui::End();
    return;
  }
  save_view_button(app, PanelId::Plan);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 14);
  ImGui::InputText("##planpath", app.plan_path, sizeof app.plan_path);
  ImGui::SameLine();
  if (ImGui::Button("Load")) {
    try {
      app.plan = load_plan(app.plan_path);
      app.note(std::string("loaded plan ") + app.plan_path);
    } catch (const Error& e) {
      app.note(e.what());
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Save")) {
    try {
      save_plan(app.plan_path, app.plan);
      app.note(std::string("saved plan ") + app.plan_path);
    } catch (const Error& e) {
      app.note(e.what());
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Reset")) app.plan = ExportPlan{};

  hint_field("##pattern", "pattern (glob or re:REGEX)", app.plan_pattern, 12);
  ImGui::SameLine();
  hint_field("##pdtype", "datatype or keep", app.plan_dtype, 9);
  ImGui::SameLine();
  if (ImGui::Button("Assign")) add_plan_rule(app, app.plan_pattern, app.plan_dtype);
  ImGui::SameLine();
  if (ImGui::Button("Use composer's")) {
    const DataType& d = app.composer.dtype;
    std::snprintf(app.plan_dtype, sizeof app.plan_dtype, "%s",
                  (d.name().empty() ? d.str() : d.name()).c_str());
  }

  ImGui::BeginDisabled(app.auto_job.running());
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
  ImGui::SliderFloat("SNR target (dB)", &app.snr_target, 5.0f, 60.0f, "%.1f");
  ImGui::SameLine();
  if (ImGui::Button("Auto-assign")) start_auto_assign(app);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "For every tensor, the candidate datatype with the fewest bits per value whose SNR "
        "reaches the target");
  hint_field("candidates", "mxfp8e4,mxfp6e2,mxfp4e2,nvfp4,e4m3fn_float32_t0,...",
             app.auto_candidates, 28,
             "Datatypes auto-assign may pick, comma-separated; empty: MXFP8, MXFP6, "
             "MXFP4, NVFP4, FP8 per channel and 128x128 block, BF16");
  ImGui::Checkbox("1-D tensors", &app.auto_include_1d);
  ImGui::SameLine();
  ImGui::Checkbox("embeddings", &app.auto_include_embeddings);
  ImGui::SameLine();
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped(
      "quantization axis %s (composer; auto: a linear weight's in-features, a "
      "conv weight's I*kh*kw)",
      app.composer.axis.str().c_str());
  ImGui::PopStyleColor();
  job_line(app.auto_job);
  draw_plan_budget(app);
  draw_plan_rules(app);
  // Below the rules, so that the editor stays put while each edit's plan is evaluated.
  job_line(app.plan_job);

  const PlanResult* p = app.plan_eval.get();
  if (!p) {
    ImGui::TextDisabled("evaluating...");
    ImGui::End();
    return;
  }
  ImGui::TextWrapped("total %s -> %s (%.1f%%), average %.3f bits per value over %llu values",
                     human_bytes(static_cast<double>(p->bytes_in)).c_str(),
                     human_bytes(static_cast<double>(p->bytes_out)).c_str(),
                     p->bytes_in ? 100.0 * p->bytes_out / p->bytes_in : 0.0, p->avg_bits,
                     static_cast<unsigned long long>(p->values));
  draw_plan_evaluate(app);
  const ImGuiTableFlags tf = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                             ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;
  // "guessed" beside the axis of a tensor whose layout nothing in the file showed (short, so
  // the datatype column keeps its room in a narrow panel; the tooltip says what was guessed).
  // The width is set when the table is first laid out, often before any tensor is cast: room
  // for a typical flattened axis from the start.
  float axis_w = ImGui::CalcTextSize("1..3:1152 guessed").x;
  for (const PlanRow& r : p->rows)
    axis_w = std::max(
        axis_w, ImGui::CalcTextSize((r.axis + (r.layout_guessed ? " guessed" : "")).c_str()).x);
  // Shapes are never shortened: their column is as wide as the widest.
  float shape_w = ImGui::CalcTextSize("shape").x;
  for (const PlanRow& r : p->rows)
    shape_w = std::max(shape_w, ImGui::CalcTextSize(shape_str(r.shape).c_str()).x);
  // The cast tensors first, in the model's order; the kept ones (1-D norms and biases,
  // embeddings, rules' keep) under one folded "kept" row below them.
  std::vector<const PlanRow*> cast_rows, kept_rows;
  uint64_t kept_bytes = 0;
  for (const PlanRow& r : p->rows) {
    if (r.dtype == "keep") {
      kept_rows.push_back(&r);
      kept_bytes += r.bytes_out;
    } else {
      cast_rows.push_back(&r);
    }
  }
  auto row = [&](const PlanRow& r, float indent) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    if (indent > 0) ImGui::Indent(indent);
    name_text(r.name);
    if (indent > 0) ImGui::Unindent(indent);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(shape_str(r.shape).c_str());
    ImGui::TableNextColumn();
    {
      // The registry name where the datatype has one (nvfp4, not its canonical string).
      std::string shown = r.dtype;
      for (const RegistryEntry& e : registry())
        if (e.spec == r.dtype) {
          shown = e.name;
          break;
        }
      const std::string fitted = fit_text(shown, ImGui::GetContentRegionAvail().x);
      ImGui::TextUnformatted(fitted.c_str());
      if ((fitted != shown || shown != r.dtype) && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", r.dtype.c_str());
    }
    ImGui::TableNextColumn();
    if (r.layout_guessed) {
      ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%s guessed", r.axis.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "layout guessed: nothing in the file shows which axis this tensor sums over, so the "
            "rule by rank decided (set an axis in a rule to override it)");
    } else {
      ImGui::TextUnformatted(r.axis.c_str());
    }
    ImGui::TableNextColumn();
    ImGui::Text("%.3g", r.bits);
    ImGui::TableNextColumn();
    if (!r.error.empty()) {
      ImGui::TextColored(ImVec4(1, 0.45f, 0.35f, 1), "error");
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", r.error.c_str());
    } else if (std::isinf(r.snr_db)) {
      ImGui::TextDisabled("exact");
    } else {
      const bool low = r.snr_db < app.snr_target;
      ImGui::TextColored(low ? ImVec4(1, 0.6f, 0.3f, 1) : ImGui::GetStyle().Colors[ImGuiCol_Text],
                         "%.2f", r.snr_db);
    }
    ImGui::TableNextColumn();
    ImGui::Text("%s", human_bytes(static_cast<double>(r.bytes_out)).c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("stored: %s", human_bytes(static_cast<double>(r.bytes_in)).c_str());
  };
  if (ImGui::BeginTable("##plan", 7, tf)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("tensor", ImGuiTableColumnFlags_WidthStretch, 1.0f);
    ImGui::TableSetupColumn("shape", ImGuiTableColumnFlags_WidthFixed, shape_w);
    ImGui::TableSetupColumn("datatype", ImGuiTableColumnFlags_WidthStretch, 1.0f);
    ImGui::TableSetupColumn("axis", ImGuiTableColumnFlags_WidthFixed, axis_w);
    // Widths for the widest figures: a plan of kept tensors lays the table out first.
    ImGui::TableSetupColumn("bits", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("16.25").x);
    ImGui::TableSetupColumn("SNR (dB)", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("SNR (dB)").x);
    ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("999.9 KiB").x);
    ImGui::TableHeadersRow();
    for (const PlanRow* r : cast_rows) row(*r, 0);
    if (!kept_rows.empty()) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      char label[96];
      std::snprintf(label, sizeof label, "kept (%zu)###kept", kept_rows.size());
      const bool open = ImGui::TreeNodeEx(label, ImGuiTreeNodeFlags_SpanFullWidth);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "%zu tensors kept as stored (1-D norms and biases, embeddings, rules' "
            "keep): %s",
            kept_rows.size(), human_bytes(static_cast<double>(kept_bytes)).c_str());
      for (int c = 0; c < 5; ++c) ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::Text("%s", human_bytes(static_cast<double>(kept_bytes)).c_str());
      if (open) {
        for (const PlanRow* r : kept_rows) row(*r, ImGui::GetStyle().IndentSpacing);
        ImGui::TreePop();
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace castscope::gui
