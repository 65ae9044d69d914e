// castscope-cli plan MODEL [-o plan.json] [--snr DB] [--candidates a,b,...] [--include-1d]
// [--include-embeddings]: per-layer auto-assignment of the cheapest candidate datatype that
// reaches an SNR target, written as a plan file for `export --plan`.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "castscope/autoplan.hpp"
#include "castscope/io.hpp"
#include "cli/command.hpp"

namespace castscope::cli {
namespace {

struct PlanArgs {
  std::string model, out, round = "even", scale_mode = "floor", device = "auto";
  std::vector<std::string> candidates;
  double snr = 30.0;
  std::string axis = "auto";
  bool include_1d = false, include_embeddings = false, json = false;
};

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
                  "mxfp4e2, nvfp4, e4m3fn_float32_t0, e4m3fn_float32_t128_t128, bfloat16)")
      ->delimiter(',');
  sub->add_flag("--include-1d", a.include_1d, "Also assign 1-D tensors (norms, biases)");
  sub->add_flag("--include-embeddings", a.include_embeddings, "Also assign embedding tables");
  add_axis_option(sub, a.axis);
  add_rounding_options(sub, a.round, a.scale_mode);
  add_device_option(sub, a.device);
  sub->add_flag("--json", a.json, "Print the picks as JSON");
  sub->callback([] {
    AutoPlanOptions o;
    o.snr_target_db = a.snr;
    if (!a.candidates.empty()) o.candidates = a.candidates;
    o.include_1d = a.include_1d;
    o.include_embeddings = a.include_embeddings;
    AxisSpec::parse(a.axis).apply(o.cast);
    o.cast.round = parse_round(a.round);
    o.cast.scale_mode = parse_scale_mode(a.scale_mode);
    o.cast.device = parse_device(a.device);
    const std::unique_ptr<io::Model> model = io::open_model(a.model);
    const std::vector<AutoPlanPick> picks = auto_assign(*model, o);
    const ExportPlan plan = plan_from_picks(picks);
    if (!a.out.empty()) save_plan(a.out, plan);
    if (a.json) {
      nlohmann::json j = nlohmann::json::array();
      for (const AutoPlanPick& p : picks) {
        const io::TensorInfo* t = model->find(p.tensor);
        j.push_back({{"tensor", p.tensor},
                     {"shape", t->shape},
                     {"axis", p.axis},
                     {"axis_length", axis_length(io::cast_options_for(o.cast, *t), t->shape)},
                     {"layout", t->layout.layout},
                     {"dtype", p.dtype},
                     {"bits", p.bits},
                     {"snr_db", p.snr_db},
                     {"met", p.met}});
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
