// Background work of the plan panel's budget planner: the table of predicted errors and the
// Pareto curve once per model and inputs, then the exact plan for each budget the user drags to.
// With activations from an inputs file or measured sensitivities the table comes from the Python
// planner (python3 -m castscope.plan_table, as castscope-cli plan runs it), read back exactly.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app_state.hpp"
#include "budget_runtime.hpp"
#include "python_job.hpp"

namespace castscope::gui {

namespace {

std::vector<std::string> split_list(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == ' ' || *c == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (!*c) break;
    } else {
      cur += *c;
    }
  }
  return out;
}

std::string model_key(const AppState& app) {
  char ptr[32];
  std::snprintf(ptr, sizeof ptr, "%p|", static_cast<const void*>(app.model.get()));
  return ptr;
}

// The table castscope.plan builds for these options, from the Python package in a child process
// (progress and cancel through ctl).
PlanTable python_table(JobControl& ctl, std::vector<std::string> args) {
  const io::TempFile table("castscope-plan-table");
  const std::string& out = table.path();
  args.insert(args.end(), {"--out", out, "--progress"});
  run_python_job(ctl, std::move(args), "budget planner");
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return plan_table_from_json(text.str());
}

}  // namespace

BudgetRuntimeOptions& budget_runtime_options() {
  static BudgetRuntimeOptions o;
  return o;
}

void start_budget_table(AppState& app) {
  if (!app.model) {
    app.note("the budget planner needs an open model");
    return;
  }
  BudgetPlanOptions o;
  const std::vector<std::string> cands = split_list(app.budget_candidates);
  if (!cands.empty()) o.candidates = cands;
  o.cast = composer_cast_options(app);
  const BudgetRuntimeOptions& rt = budget_runtime_options();
  o.synthetic = app.budget_activations && !rt.from_inputs;
  const std::string acts = rt.from_inputs ? "runtime" : o.synthetic ? "synthetic" : "none";
  std::string key = model_key(app) + AxisSpec::from(o.cast).str() + "|" + to_string(o.cast.round) +
                    "|" + to_string(o.cast.scale_mode) + "|" + acts;
  if (rt.from_inputs) key += "|inputs=" + std::string(rt.inputs);
  if (rt.sensitivity) key += "|sensitivity";
  for (const std::string& c : o.candidates) key += "|" + c;
  // Only the Python package runs the model's runtime.
  std::vector<std::string> py;
  if (rt.from_inputs || rt.sensitivity) {
    py = {python_interpreter(),
          "-m",
          "castscope.plan_table",
          app.model->path(),
          "--activations",
          acts,
          "--axis=" + AxisSpec::from(o.cast).str(),
          "--round",
          to_string(o.cast.round),
          "--scale-mode",
          to_string(o.cast.scale_mode)};
    if (rt.from_inputs && rt.inputs[0]) py.insert(py.end(), {"--inputs", rt.inputs});
    if (rt.sensitivity) py.push_back("--sensitivity");
    if (!cands.empty()) {
      std::string c;
      for (const std::string& x : cands) c += (c.empty() ? "" : ",") + x;
      py.insert(py.end(), {"--candidates", c});
    }
  }
  auto model = app.model;
  app.budget_error.clear();
  app.budget_pick.reset();
  app.started_pick.clear();
  app.budget_job.start("plan under a budget", [model, o, key, py](JobControl& job) {
    auto r = std::make_shared<BudgetTable>();
    r->key = key;
    r->table = py.empty() ? build_plan_table(*model, o, &job) : python_table(job, py);
    if (r->table.tensors.empty()) throw Error("no tensor of this model for the planner");
    r->curve = pareto_curve(r->table, 48, &job);
    r->min_bits = choose_within(r->table, 0).min_bits;
    r->max_bits = r->curve.empty() ? r->min_bits : r->curve.back().bits;
    return std::shared_ptr<const BudgetTable>(r);
  });
}

void update_budget_jobs(AppState& app) {
  std::shared_ptr<const BudgetTable> t;
  std::string err;
  if (app.budget_job.poll(&t, &err)) {
    if (!err.empty()) {
      app.budget_error = err;
      app.note("budget planner: " + err);
    } else if (t) {
      app.budget_table = t;
    }
  }
  std::shared_ptr<const BudgetPick> p;
  if (app.pick_job.poll(&p, &err)) {
    if (!err.empty())
      app.note("budget planner: " + err);
    else if (p)
      app.budget_pick = p;
  }
  // A table of another model (or none open) is stale.
  if (app.budget_table && app.budget_table->key.rfind(model_key(app), 0) != 0) {
    app.budget_table.reset();
    app.budget_pick.reset();
    app.started_pick.clear();
  }
  const std::shared_ptr<const BudgetTable> table = app.budget_table;
  if (!table || app.budget_job.running()) return;
  const uint64_t bits = budget_bits_for(table->table, std::max(app.plan_budget, 0.0));
  const std::string key = table->key + "|" + std::to_string(bits);
  if (key == app.started_pick) return;
  app.started_pick = key;
  const double bpw = app.plan_budget;
  app.pick_job.start("plan for the budget", [table, bits, bpw, key](JobControl& job) {
    auto r = std::make_shared<BudgetPick>();
    r->key = key;
    r->budget_bpw = bpw;
    r->choice = choose_within(table->table, bits, &job);
    if (r->choice.feasible) {
      r->plan = plan_from_choice(table->table, r->choice);
      r->plan.budget->bits_per_weight = bpw;
    }
    return std::shared_ptr<const BudgetPick>(r);
  });
}

void apply_budget_plan(AppState& app) {
  const BudgetPick* p = app.budget_pick.get();
  if (!p || !p->choice.feasible) {
    app.note("no budget plan to use yet");
    return;
  }
  // The plan's axis-only rules (layout overrides) stay: the table was built with them.
  app.plan = with_axis_overrides(p->plan, app.plan);
  char buf[128];
  std::snprintf(buf, sizeof buf, "plan for %.4f bits per weight: %zu rules", p->budget_bpw,
                p->plan.rules.size());
  app.note(buf);
}

}  // namespace castscope::gui
