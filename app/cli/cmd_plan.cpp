// castscope-cli plan MODEL [-o plan.json] [--snr DB] [--candidates a,b,...] [--include-1d]
// [--include-embeddings]: per-layer auto-assignment of the cheapest candidate datatype that
// reaches an SNR target, written as a plan file for `export --plan`. With --budget BPW or
// --budget-bytes N the exact least-predicted-error choice within the size (docs/planning.md);
// --pareto prints the curve of optimal plans. Activations from the model's own runtime
// (--activations runtime, --inputs) and measured sensitivities (--sensitivity) come from the Python
// package's planner (python3 -m castscope.plan_table, as eval runs castscope.eval): its table is
// solved and printed here like the engine's own.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "castscope/autoplan.hpp"
#include "castscope/io.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/metrics_json.hpp"
#include "castscope/planner.hpp"
#include "cli/command.hpp"
#include "cli/opt_method.hpp"
#include "cli/python_child.hpp"

namespace castscope::cli {
namespace {

struct PlanArgs {
  std::string model, out, round = "even", scale_mode = "floor", device = "auto";
  std::vector<std::string> candidates;
  double snr = 30.0;
  std::string axis = "auto";
  std::vector<std::string> axis_for;  // PATTERN=AXIS layout overrides, kept in the plan written
  bool include_1d = false, include_embeddings = false, json = false, csv = false;
  bool split_fused = false;
  double budget = -1;
  int64_t budget_bytes = -1;
  bool pareto = false, no_role_weights = false, absolute = false;
  std::string activations, inputs;
  bool sensitivity = false;
  int64_t tokens = 64;
  int points = 48;
  std::string calib;  // calibration inputs keyed by weight name: method candidates use them
  MethodOptions method;
  std::string layout;  // the target layout the plan is for ("" = none named)
};

// Without --layout: a plan that no layout can hold says so before it is exported, naming the
// tensors each layout refuses.
void warn_unless_some_layout_holds(const io::Model& model, const ExportPlan& plan,
                                   const CastOptions& cast) {
  const PlanFit fit = plan_fit(model, plan, cast);
  if (!fit.holds.empty()) return;
  std::fprintf(stderr, "warning: no export layout holds this plan (choose one with --layout):\n");
  for (const auto& [layout, why] : fit.refused) {
    std::fprintf(stderr, "  %s refuses %zu tensor(s):", to_string(layout), why.size());
    for (size_t i = 0; i < why.size() && i < 3; ++i)
      std::fprintf(stderr, "%s '%s' (%s)", i ? "," : "", why[i].first.c_str(),
                   why[i].second.c_str());
    std::fprintf(stderr, "%s\n", why.size() > 3 ? ", ..." : "");
  }
}

std::atomic<JobControl*> g_plan_job{nullptr};
void plan_on_sigint(int) {
  if (JobControl* j = g_plan_job.load()) j->cancel = true;
}

// "synthetic[:TOKENS[:OUTLIERS[:SCALE[:SEED]]]]" (sized per tensor) or a file.
void set_activations(BudgetPlanOptions& o, const std::string& spec) {
  if (spec.rfind("synthetic", 0) != 0) {
    o.activations = load_activations(spec).to_f32();
    return;
  }
  o.synthetic = true;
  const std::string rest = spec.substr(9);
  if (rest.empty()) return;
  long long tokens = o.tokens;
  int outliers = o.outliers;
  double scale = o.outlier_scale;
  unsigned long long seed = o.seed;
  char extra = 0;
  const int n =
      std::sscanf(rest.c_str(), ":%lld:%d:%lf:%llu%c", &tokens, &outliers, &scale, &seed, &extra);
  if (n < 1 || n > 4 || tokens <= 0 || outliers < 0 || !(scale > 0))
    throw Error("--activations '" + spec +
                "': expected synthetic[:TOKENS[:OUTLIERS[:SCALE[:SEED]]]] (the features follow "
                "each tensor)");
  o.tokens = tokens;
  o.outliers = outliers;
  o.outlier_scale = scale;
  o.seed = seed;
}

// Whether the table comes from the Python planner: the model's runtime runs for it.
bool needs_runtime(const PlanArgs& a) {
  return a.activations == "runtime" || a.sensitivity || !a.inputs.empty();
}

// The table castscope.plan builds (python3 -m castscope.plan_table), read back exactly.
PlanTable python_table(const PlanArgs& a) {
  const bool plain = a.activations.empty() || a.activations == "runtime" ||
                     a.activations == "synthetic" || a.activations == "none";
  if (!plain)
    throw Error("plan: --activations '" + a.activations +
                "' goes with neither --inputs nor --sensitivity (they run the model's runtime; "
                "use --activations runtime, synthetic or none with them)");
  if (!a.inputs.empty() && a.activations != "runtime" && !a.activations.empty() && !a.sensitivity)
    throw Error("plan: --inputs goes with --activations runtime or --sensitivity");
  const std::string py = python_exe();
  require_python_module(py, "castscope.plan_table",
                        "plan with --activations runtime, --inputs or --sensitivity runs the "
                        "package (python3 -m castscope.plan_table)");
  const io::TempFile table("castscope-plan-table");
  const std::string& tmpl = table.path();
  // No --activations with --inputs means runtime; with --sensitivity alone, the weight form.
  const std::string acts = !a.activations.empty() ? a.activations
                           : !a.inputs.empty()    ? "runtime"
                                                  : "none";
  std::vector<std::string> args = {py,      "-m", "castscope.plan_table", a.model,
                                   "--out", tmpl, "--activations",        acts};
  if (!a.inputs.empty()) args.insert(args.end(), {"--inputs", a.inputs});
  if (a.sensitivity) args.push_back("--sensitivity");
  if (!a.candidates.empty()) {
    std::string c;
    for (const std::string& x : a.candidates) c += (c.empty() ? "" : ",") + x;
    args.insert(args.end(), {"--candidates", c});
  }
  if (a.include_1d) args.push_back("--include-1d");
  if (a.include_embeddings) args.push_back("--include-embeddings");
  if (a.no_role_weights) args.push_back("--no-role-weights");
  if (a.absolute) args.push_back("--absolute");
  args.insert(args.end(), {"--round", a.round, "--scale-mode", a.scale_mode, "--axis", a.axis,
                           "--device", a.device});
  run_child_or_exit(args, py);
  std::ifstream in(tmpl);
  std::stringstream text;
  text << in.rdbuf();
  return plan_table_from_json(text.str());
}

// The budget planner's output: the chosen plan, the Pareto curve, or both.
void run_budget(const PlanArgs& a, const CastOptions& cast) {
  const bool runtime = needs_runtime(a);
  BudgetPlanOptions o;
  if (!a.candidates.empty()) o.candidates = a.candidates;
  o.include_1d = a.include_1d;
  o.include_embeddings = a.include_embeddings;
  o.split_fused = a.split_fused;
  o.cast = cast;
  o.role_weights = !a.no_role_weights;
  o.relative = !a.absolute;
  o.tokens = a.tokens;
  if (!a.layout.empty()) {
    if (runtime)
      throw Error(
          "plan: --layout goes with the engine's planner only, not with --activations runtime, "
          "--inputs or --sensitivity");
    o.layout = parse_layout(a.layout);
  }
  if (!runtime && !a.activations.empty() && a.activations != "none")
    set_activations(o, a.activations);
  // The runtime planner (Python) takes each tensor's layout from the file as the runtime uses it.
  if (runtime && !a.axis_for.empty())
    throw Error(
        "plan: --axis-for goes with the engine's planner only, not with --activations "
        "runtime, --inputs or --sensitivity");
  // Datatype x method candidates: gptq / awq quantize on calibration inputs, and with them every
  // candidate of a weight is scored on its own inputs.
  o.method_options = a.method;
  bool method_candidates = false;
  for (const std::string& c : o.candidates) {
    const PlanCandidate pc = parse_plan_candidate(c, a.method);
    method_candidates |= pc.method.method != Method::RTN;
    if (method_needs_calibration(pc.method.method) && a.calib.empty())
      throw Error("plan: candidate '" + c + "' needs calibration inputs (--calib FILE)");
  }
  if (runtime && (method_candidates || !a.calib.empty()))
    throw Error(
        "plan: method candidates (D@METHOD) and --calib go with the engine's planner only, not "
        "with --activations runtime, --inputs or --sensitivity");
  if (!a.calib.empty()) o.calib = calib_by_name(a.calib);
  const ExportPlan overrides = axis_override_plan(a.axis_for);
  const std::unique_ptr<io::Model> model =
      runtime ? nullptr : with_layout_overrides(io::open_model(a.model), overrides);
  JobControl job;
  const bool tty = ::isatty(2) != 0;
  job.on_progress = [tty](double f) {
    static std::atomic<int> last{-1};
    const int pct = static_cast<int>(f * 100);
    if (!tty || last.exchange(pct) == pct) return;
    std::fprintf(stderr, "\r\033[Kplan: %3d%%", pct);
  };
  g_plan_job = &job;
  auto prev = std::signal(SIGINT, plan_on_sigint);
  PlanTable t;
  std::optional<BudgetChoice> choice;
  std::vector<ParetoPoint> curve;
  try {
    t = runtime ? python_table(a) : build_plan_table(*model, o, &job);
    t.split_fused = a.split_fused;
    if (tty && !runtime) std::fprintf(stderr, "\r\033[K");
    if (t.tensors.empty() && o.layout) {
      // Nothing the layout holds: every tensor stays as stored, which that layout can write.
      std::fprintf(stderr,
                   "warning: the %s layout holds none of the candidates on any tensor of '%s'; "
                   "the plan keeps every tensor\n",
                   to_string(*o.layout), a.model.c_str());
      if (!a.out.empty())
        save_plan(a.out,
                  with_axis_overrides(parse_plan("{\"default\": \"keep\"}", "plan"), overrides));
      return;
    }
    if (t.tensors.empty()) throw Error("plan: no tensor of '" + a.model + "' to choose for");
    if (a.budget >= 0 || a.budget_bytes >= 0) {
      const uint64_t bits =
          a.budget >= 0 ? budget_bits_for(t, a.budget) : static_cast<uint64_t>(a.budget_bytes) * 8;
      choice = choose_or_refuse(t, bits, &job);
    }
    if (a.pareto) curve = pareto_curve(t, a.points, &job);
  } catch (...) {
    std::signal(SIGINT, prev);
    g_plan_job = nullptr;
    if (tty) std::fprintf(stderr, "\r\033[K");
    throw;
  }
  std::signal(SIGINT, prev);
  g_plan_job = nullptr;
  const double v = static_cast<double>(t.values);
  if (choice && a.pareto) {
    // The chosen plan is Pareto-optimal too: it joins the curve where the sampling missed it.
    auto at = std::lower_bound(curve.begin(), curve.end(), choice->bits,
                               [](const ParetoPoint& p, uint64_t b) { return p.bits < b; });
    if (at == curve.end() || at->bits != choice->bits)
      curve.insert(at, {choice->bits, choice->bits / v, choice->error});
  }
  if (choice && !a.out.empty()) {
    ExportPlan p = plan_from_choice(t, *choice);
    if (a.budget >= 0) p.budget->bits_per_weight = a.budget;
    if (!o.layout && model) warn_unless_some_layout_holds(*model, p, o.cast);
    save_plan(a.out, with_axis_overrides(p, overrides));
  }
  auto chosen_dtype = [&](size_t i) {
    const PlanTensor& pt = t.tensors[i];
    return t.candidates[static_cast<size_t>(
        pt.options[static_cast<size_t>(choice->option[i])].candidate)];
  };
  if (a.csv) {
    if (a.pareto) {
      std::printf("bits,bits_per_weight,predicted_error,chosen\n");
      for (const ParetoPoint& p : curve)
        std::printf("%llu,%.6f,%.9g,%d\n", static_cast<unsigned long long>(p.bits),
                    p.bits_per_weight, p.error, choice && p.bits == choice->bits ? 1 : 0);
      return;
    }
    std::printf(
        "tensor,shape,axis,dtype,bits,bits_per_value,predicted_error,weight_snr_db,"
        "predictor,role\n");
    for (size_t i = 0; i < t.tensors.size(); ++i) {
      const PlanTensor& pt = t.tensors[i];
      const PlanOption& po = pt.options[static_cast<size_t>(choice->option[i])];
      std::string shape = shape_str(pt.shape);
      for (char& c : shape)
        if (c == ',') c = 'x';
      std::printf("\"%s\",%s,%s,%s,%llu,%.6f,%.9g,%.4f,%s,%g\n", pt.name.c_str(), shape.c_str(),
                  pt.axis.c_str(), chosen_dtype(i).c_str(),
                  static_cast<unsigned long long>(po.bits),
                  static_cast<double>(po.bits) / static_cast<double>(pt.numel), po.error, po.snr_db,
                  pt.predictor.c_str(), pt.role);
    }
    return;
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["candidates"] = t.candidates;
    j["activations"] = t.activations;
    j["error"] = t.relative ? "relative" : "absolute";
    j["values"] = t.values;
    j["kept_bits"] = t.kept_bits;
    if (choice) {
      j["budget"] = {{"bits_per_weight", a.budget >= 0 ? a.budget : choice->budget_bits / v},
                     {"bits", choice->budget_bits}};
      j["plan"] = {{"bits", choice->bits},
                   {"bits_per_weight", choice->bits / v},
                   {"predicted_error", choice->error},
                   {"min_bits", choice->min_bits},
                   {"search_nodes", choice->nodes}};
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (size_t i = 0; i < t.tensors.size(); ++i) {
        const PlanTensor& pt = t.tensors[i];
        const PlanOption& po = pt.options[static_cast<size_t>(choice->option[i])];
        nlohmann::ordered_json opts = nlohmann::ordered_json::array();
        for (const PlanOption& x : pt.options) {
          nlohmann::ordered_json jo = {{"dtype", t.candidates[static_cast<size_t>(x.candidate)]},
                                       {"bits", x.bits},
                                       {"predicted_error", x.error}};
          metrics_json::put_snr(jo, "weight_snr_db", x.snr_db);
          opts.push_back(jo);
        }
        nlohmann::ordered_json row = {{"tensor", pt.name}, {"shape", pt.shape},
                                      {"axis", pt.axis},   {"dtype", chosen_dtype(i)},
                                      {"bits", po.bits},   {"predicted_error", po.error}};
        metrics_json::put_snr(row, "weight_snr_db", po.snr_db);
        row["predictor"] = pt.predictor;
        row["role"] = pt.role;
        row["options"] = opts;
        rows.push_back(row);
      }
      j["tensors"] = rows;
    }
    if (a.pareto) {
      nlohmann::ordered_json c = nlohmann::ordered_json::array();
      for (const ParetoPoint& p : curve)
        c.push_back({{"bits", p.bits},
                     {"bits_per_weight", p.bits_per_weight},
                     {"predicted_error", p.error},
                     {"chosen", choice && p.bits == choice->bits}});
      j["pareto"] = c;
    }
    j["kept"] = nlohmann::ordered_json::array();
    for (const auto& [name, why] : t.kept) j["kept"].push_back({{"tensor", name}, {"reason", why}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (choice) {
    std::printf("%-48s %-14s %-9s %-10s %8s %12s %8s\n", "tensor", "shape", "axis", "dtype",
                "bits/w", "pred. error", "SNR dB");
    for (size_t i = 0; i < t.tensors.size(); ++i) {
      const PlanTensor& pt = t.tensors[i];
      const PlanOption& po = pt.options[static_cast<size_t>(choice->option[i])];
      std::printf("%-48s %-14s %-9s %-10s %8.4f %12.5g %8.2f\n", pt.name.c_str(),
                  shape_str(pt.shape).c_str(), pt.axis.c_str(), chosen_dtype(i).c_str(),
                  static_cast<double>(po.bits) / static_cast<double>(pt.numel), po.error,
                  po.snr_db);
    }
    std::printf(
        "plan: %.4f bits per weight (%llu bytes) within %.4f (%llu bytes) over %lld "
        "weights; predicted error %.6g; %zu tensors kept as stored (%llu bytes)%s\n",
        choice->bits / v, static_cast<unsigned long long>((choice->bits + 7) / 8),
        choice->budget_bits / v, static_cast<unsigned long long>(choice->budget_bits / 8),
        static_cast<long long>(t.values), choice->error, t.kept.size(),
        static_cast<unsigned long long>(t.kept_bits / 8),
        a.out.empty() ? "" : (", plan written to " + a.out).c_str());
  }
  if (a.pareto) {
    std::printf("%12s %14s %14s\n", "bits/weight", "bits", "pred. error");
    for (const ParetoPoint& p : curve)
      std::printf("%12.4f %14llu %14.6g%s\n", p.bits_per_weight,
                  static_cast<unsigned long long>(p.bits), p.error,
                  choice && p.bits == choice->bits ? "  <- chosen" : "");
  }
}

void plan_cmd(CLI::App& app) {
  static PlanArgs a;
  auto* sub = app.add_subcommand(
      "plan", "Auto-assign per-layer datatypes from a candidate set (writes a plan for export)");
  sub->add_option("model", a.model, "Model: a file, a directory or a *.safetensors.index.json")
      ->required();
  sub->add_option("-o,--output", a.out, "Plan JSON to write (default: print only)");
  sub->add_option("--snr", a.snr, "SNR target in dB (default 30)");
  sub->add_option("--candidates", a.candidates,
                  "Datatypes to choose from, comma-separated (default: mxfp8e4, mxfp6e2, "
                  "mxfp4e2, nvfp4, e4m3fn_float32_t0, e4m3fn_float32_t128_t128, bfloat16; with "
                  "--budget, --budget-bytes or --pareto: mxfp4e2, nvfp4, q4_k, mxfp6e2, q6_k, "
                  "mxfp8e4, q8_0, bfloat16). With --budget, D@METHOD (D quantized with "
                  "gptq | mse | awq | four-over-six, as the map's columns) makes a datatype x "
                  "method candidate")
      ->delimiter(',');
  sub->add_option("--calib", a.calib,
                  "Budget planner: calibration inputs [tokens, in] keyed by weight name "
                  "(.safetensors / .npz): gptq / awq candidates quantize with them, and every "
                  "candidate of a weight is scored on them")
      ->check(CLI::ExistingFile);
  add_method_settings(sub, a.method);
  sub->add_flag("--include-1d", a.include_1d, "Also assign 1-D tensors (norms, biases)");
  sub->add_flag("--split-fused", a.split_fused,
                "--budget: let projections that vLLM fuses (q/k/v, gate/up, experts' w1/w3) "
                "take different datatypes (default: one per group)");
  sub->add_flag("--include-embeddings", a.include_embeddings, "Also assign embedding tables");
  add_axis_option(sub, a.axis);
  add_axis_for_option(sub, a.axis_for);
  add_rounding_options(sub, a.round, a.scale_mode);
  add_device_option(sub, a.device);
  sub->add_option("--layout", a.layout,
                  "The export layout the plan is for: each tensor's candidates are restricted to "
                  "what it holds along the tensor's axis (without it, a plan no layout holds is "
                  "warned about)")
      ->check(CLI::IsMember({"native", "gguf", "compressed-tensors", "gpt-oss"}));
  sub->add_flag("--json", a.json, "Print the picks as JSON");
  auto* budget = sub->add_option(
      "--budget", a.budget,
      "Bits per weight (over the planned tensors): the exact least-predicted-error plan within "
      "it (docs/planning.md)");
  budget->check(CLI::NonNegativeNumber);
  auto* bytes = sub->add_option("--budget-bytes", a.budget_bytes,
                                "Budget in bytes of the planned tensors instead of --budget");
  bytes->check(CLI::NonNegativeNumber);
  budget->excludes(bytes);
  bytes->excludes(budget);
  sub->add_flag("--pareto", a.pareto,
                "The Pareto curve of optimal plans (bits per weight against predicted error)");
  sub->add_option("--points", a.points, "Budgets sampled for --pareto (default 48)")
      ->check(CLI::Range(2, 10000));
  sub->add_flag("--csv", a.csv, "Print CSV (the curve with --pareto, else the budget plan)");
  sub->add_option("--activations", a.activations,
                  "Budget planner: activations [tokens, features] (.npy / .safetensors) for "
                  "every tensor whose quantization axis has that length, "
                  "synthetic[:TOKENS[:OUTLIERS[:SCALE[:SEED]]]] for every tensor, runtime (the "
                  "inputs of every layer as the model's runtime computes them; ONNX and Hugging "
                  "Face models, through the Python package) or none (the weight form)");
  sub->add_option("--inputs", a.inputs,
                  "Budget planner: the model's inputs for --activations runtime and "
                  "--sensitivity, as eval takes them (default: synthesized from the input spec)");
  sub->add_flag("--sensitivity", a.sensitivity,
                "Budget planner: scale each tensor's errors by its end-to-end sensitivity, "
                "measured by running the model with that tensor alone cast (Python package)");
  sub->add_option("--tokens", a.tokens, "Activation rows used (default 64; 0: all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--no-role-weights", a.no_role_weights,
                "Budget planner: every tensor's error counts once (no role weights)");
  sub->add_flag("--absolute", a.absolute,
                "Budget planner: absolute squared errors, not each divided by the tensor's own "
                "output energy");
  sub->callback([] {
    if (a.json && a.csv) throw Error("plan: choose one of --csv and --json");
    const bool budgeted = a.budget >= 0 || a.budget_bytes >= 0 || a.pareto;
    if (!budgeted && (a.csv || !a.activations.empty() || a.no_role_weights || a.absolute ||
                      !a.inputs.empty() || a.sensitivity || !a.calib.empty()))
      throw Error(
          "plan: --csv, --activations, --inputs, --sensitivity, --calib, --no-role-weights and "
          "--absolute go with --budget, --budget-bytes or --pareto");
    if (budgeted) {
      const CastOptions c = parse_cast_options(
          {.round = a.round, .scale_mode = a.scale_mode, .axis = a.axis, .device = a.device});
      if (a.csv && !a.pareto && a.budget < 0 && a.budget_bytes < 0)
        throw Error("plan: --csv needs --budget, --budget-bytes or --pareto");
      run_budget(a, c);
      return;
    }
    AutoPlanOptions o;
    o.snr_target_db = a.snr;
    if (!a.candidates.empty()) o.candidates = a.candidates;
    o.include_1d = a.include_1d;
    o.include_embeddings = a.include_embeddings;
    o.cast = parse_cast_options(
        {.round = a.round, .scale_mode = a.scale_mode, .axis = a.axis, .device = a.device}, o.cast);
    const ExportPlan overrides = axis_override_plan(a.axis_for);
    const std::unique_ptr<io::Model> model =
        with_layout_overrides(io::open_model(a.model), overrides);
    if (!a.layout.empty()) o.layout = parse_layout(a.layout);
    const std::vector<AutoPlanPick> picks = auto_assign(*model, o);
    const ExportPlan plan = with_axis_overrides(plan_from_picks(picks), overrides);
    if (!o.layout) warn_unless_some_layout_holds(*model, plan, o.cast);
    if (!a.out.empty()) save_plan(a.out, plan);
    if (a.json) {
      nlohmann::json j = nlohmann::json::array();
      for (const AutoPlanPick& p : picks) {
        const io::TensorInfo* t = model->find(p.tensor);
        nlohmann::json row = {
            {"tensor", p.tensor},
            {"shape", t->shape},
            {"axis", p.axis},
            {"axis_length", axis_length(io::cast_options_for(o.cast, *t), t->shape)},
            {"layout", t->layout.layout},
            {"dtype", p.dtype},
            {"bits", p.bits}};
        metrics_json::put_snr(row, "snr_db", p.snr_db);
        row["met"] = p.met;
        j.push_back(row);
      }
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%-48s %-14s %-9s %-28s %6s %8s\n", "tensor", "shape", "axis", "dtype", "bits",
                  "SNR dB");
      for (const AutoPlanPick& p : picks) {
        const io::TensorInfo* t = model->find(p.tensor);
        std::printf("%-48s %-14s %-9s %-28s %6.3f %8.2f%s\n", p.tensor.c_str(),
                    shape_str(t->shape).c_str(), p.axis.c_str(),
                    p.dtype.empty() ? "-" : p.dtype.c_str(), p.bits, p.snr_db,
                    p.met ? "" : "  (target not met)");
      }
      std::printf("%zu tensors assigned; the others are kept%s\n", picks.size(),
                  a.out.empty() ? "" : (", plan written to " + a.out).c_str());
    }
  });
}

Register reg(plan_cmd);

}  // namespace
}  // namespace castscope::cli
