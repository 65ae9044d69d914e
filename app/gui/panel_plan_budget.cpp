// The plan panel's budget planner: candidates and predictor, the Pareto curve of optimal plans
// (bits per weight against predicted error) with the budget dragged along it, the plan chosen for
// the budget, and a button that makes it the panel's plan.
#include <imgui.h>

#include <cmath>

#include "budget_runtime.hpp"
#include "castscope/widgets/pareto_plot.hpp"
#include "panels.hpp"

namespace castscope::gui {

void draw_plan_budget(AppState& app) {
  if (!ImGui::CollapsingHeader("Budget planner", ImGuiTreeNodeFlags_DefaultOpen)) return;
  ImGui::BeginDisabled(app.budget_job.running());
  hint_field("##budgetcands", "mxfp4e2,nvfp4,q4_k,mxfp6e2,q6_k,mxfp8e4,q8_0,...",
             app.budget_candidates, 24,
             "Datatypes the planner chooses from, comma-separated; empty: mxfp4e2, nvfp4, q4_k, "
             "mxfp6e2, q6_k, mxfp8e4, q8_0, bfloat16");
  ImGui::SameLine();
  if (ImGui::Button("Plan")) start_budget_table(app);
  // Activations: none (the weights' relative error), the synthetic generator, or what the
  // model's runtime computes on an inputs file (Python package).
  BudgetRuntimeOptions& rt = budget_runtime_options();
  int acts = rt.from_inputs ? 2 : app.budget_activations ? 1 : 0;
  ImGui::TextUnformatted("activations:");
  const char* const labels[] = {"none", "synthetic", "from inputs file"};
  const char* const tips[] = {
      "Predict from the weights: each tensor's relative squared error ||Q(W) - W||^2 / ||W||^2",
      "Predict each tensor's relative output error ||XW - XQ(W)||^2 / ||XW||^2 with synthetic "
      "activations (outlier channels)",
      "Predict each tensor's relative output error with the activations the model's own runtime "
      "computes (onnxruntime, PyTorch) on the inputs file (.npy / .npz / text; empty: "
      "synthesized from the input spec), through the castscope Python package"};
  for (int i = 0; i < 3; ++i) {
    ImGui::SameLine();
    if (ImGui::RadioButton(labels[i], acts == i)) acts = i;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s; weighted by role", tips[i]);
  }
  app.budget_activations = acts == 1;
  rt.from_inputs = acts == 2;
  if (rt.from_inputs) {
    ImGui::SameLine();
    hint_field("##budgetinputs", "inputs (.npy / .npz / text)", rt.inputs, 14);
  }
  ImGui::SameLine();
  ImGui::Checkbox("sensitivity", &rt.sensitivity);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Run the model once per tensor with only that tensor cast and scale its predicted "
        "errors to the output divergence measured (Python package; ONNX and Hugging Face "
        "models)");
  ImGui::EndDisabled();
  job_line(app.budget_job);
  if (!app.budget_error.empty()) error_text(app.budget_error);
  const BudgetTable* t = app.budget_table.get();
  if (!t) {
    ImGui::TextDisabled("Plan: the least predicted error within a size budget (exact)");
    return;
  }
  const double v = static_cast<double>(t->table.values);
  const double lo = static_cast<double>(t->min_bits) / v, hi = static_cast<double>(t->max_bits) / v;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
  ImGui::InputDouble("budget (bits per weight)", &app.plan_budget, 0.05, 0.5, "%.4f");
  std::vector<widgets::ParetoPlotPoint> pts;
  for (const ParetoPoint& p : t->curve) pts.push_back({p.bits_per_weight, p.error});
  widgets::ParetoPlotOptions po;
  po.min_bpw = lo;
  po.max_bpw = hi;
  const BudgetPick* pick = app.budget_pick.get();
  if (pick && pick->choice.feasible) {
    po.chosen_bpw = pick->choice.bits_per_weight(t->table);
    po.chosen_error = pick->choice.error;
  }
  widgets::draw_pareto_plot("pareto", pts, po, &app.plan_budget,
                            ImVec2(-1, ImGui::GetFontSize() * 11));
  job_line(app.pick_job);
  if (!pick) return;
  if (!pick->choice.feasible) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.6f, 0.3f, 1));
    ImGui::TextWrapped("%.4f bits per weight is below the smallest plan: %.4f bits per weight",
                       pick->budget_bpw, static_cast<double>(pick->choice.min_bits) / v);
    ImGui::PopStyleColor();
    return;
  }
  // The button first, so that a long summary wraps beside it instead of pushing it off the panel.
  if (ImGui::Button("Use this plan")) apply_budget_plan(app);
  ImGui::SameLine();
  ImGui::TextWrapped(
      "plan %.4f bits per weight (%s) for %.4f; predicted error %.5g; %zu tensors, %zu "
      "kept as stored",
      pick->choice.bits_per_weight(t->table),
      human_bytes(static_cast<double>(pick->choice.bits) / 8).c_str(), pick->budget_bpw,
      pick->choice.error, t->table.tensors.size(), t->table.kept.size());
}

}  // namespace castscope::gui
