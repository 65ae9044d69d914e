// Pareto plot of the budget planner: the optimal plans as points (bits per weight against
// predicted error, log error axis), the best error reachable at each budget as a step line, the
// budget as a vertical line the user drags, and the plan chosen for it marked.
#pragma once

#include <imgui.h>

#include <cmath>
#include <vector>

namespace castscope::widgets {

struct ParetoPlotPoint {
  double bits_per_weight = 0;
  double error = 0;
};

struct ParetoPlotOptions {
  double chosen_bpw = NAN, chosen_error = NAN;  // the plan for the budget (NaN: none yet)
  double min_bpw = NAN, max_bpw = NAN;          // the budget's range (NaN: the points')
  // The error axis' caption, drawn above the plot (docs/planning.md, "The predictor").
  const char* y_label = "predicted output error (sum of squared errors, log scale)";
};

// Draws the plot and lets the user drag (or click) the budget; returns true in the frame the
// budget changed, with *budget_bpw updated. Points must be ordered by bits per weight.
bool draw_pareto_plot(const char* id, const std::vector<ParetoPlotPoint>& points,
                      const ParetoPlotOptions& o, double* budget_bpw, ImVec2 size);

}  // namespace castscope::widgets
