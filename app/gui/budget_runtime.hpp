// The budget planner's runtime options (actions_budget.cpp, panel_plan_budget.cpp): activations
// the model's own runtime computes on an inputs file, and each tensor's end-to-end sensitivity
// measured in it, both through the castscope Python package (docs/planning.md).
#pragma once

namespace castscope::gui {

struct BudgetRuntimeOptions {
  bool from_inputs = false;  // "from inputs file" (AppState::budget_activations is "synthetic")
  char inputs[512] = "";     // empty: inputs synthesized from the model's input spec
  bool sensitivity = false;
};

BudgetRuntimeOptions& budget_runtime_options();

}  // namespace castscope::gui
