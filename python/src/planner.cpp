// The budget planner for Python (castscope.plan): the table of predicted errors, the exact
// choice under a budget and the Pareto curve, with activations the caller collected per tensor.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "castscope/io.hpp"
#include "castscope/planner.hpp"
#include "common.hpp"

namespace castscope::py {

using namespace nb::literals;

namespace {

nb::dict table_dict(const PlanTable& t) {
  nb::list tensors;
  for (const PlanTensor& pt : t.tensors) {
    nb::list opts;
    for (const PlanOption& po : pt.options) {
      nb::dict o;
      o["dtype"] = t.candidates[static_cast<size_t>(po.candidate)];
      o["bits"] = po.bits;
      o["error"] = po.error;
      o["weight_sse"] = po.weight_sse;
      o["snr_db"] = po.snr_db;
      opts.append(o);
    }
    nb::dict d;
    d["name"] = pt.name;
    d["shape"] = pt.shape;
    d["numel"] = pt.numel;
    d["axis"] = pt.axis;
    d["predictor"] = pt.predictor;
    d["role"] = pt.role;
    d["sensitivity"] = pt.sensitivity;
    d["energy"] = pt.energy;
    d["options"] = opts;
    tensors.append(d);
  }
  nb::list kept;
  for (const auto& [name, why] : t.kept) kept.append(nb::make_tuple(name, why));
  nb::dict d;
  d["candidates"] = t.candidates;
  d["tensors"] = tensors;
  d["values"] = t.values;
  d["kept"] = kept;
  d["kept_bits"] = t.kept_bits;
  d["activations"] = t.activations;
  d["error"] = t.relative ? "relative" : "absolute";
  return d;
}

}  // namespace

void bind_planner(nb::module_& m) {
  m.def(
      "_plan_budget",
      [](const io::Model& model, const std::vector<std::string>& candidates, double budget,
         int64_t budget_bytes, int points, const std::string& axis, const std::string& round,
         const std::string& scale_mode, const std::string& device, bool include_1d,
         bool include_embeddings, bool role_weights, bool relative, bool synthetic, int64_t tokens,
         const std::map<std::string, nb::ndarray<nb::ro, nb::c_contig>>& acts,
         const std::map<std::string, double>& sensitivity, nb::handle progress) {
        BudgetPlanOptions o;
        if (!candidates.empty()) o.candidates = candidates;
        o.include_1d = include_1d;
        o.include_embeddings = include_embeddings;
        o.cast.round = parse_round(round);
        o.cast.scale_mode = parse_scale_mode(scale_mode);
        AxisSpec::parse(axis).apply(o.cast);
        o.cast.device = parse_device(device);
        o.role_weights = role_weights;
        o.relative = relative;
        o.synthetic = synthetic;
        o.tokens = tokens;
        o.tensor_sensitivity = sensitivity;
        for (const auto& [name, a] : acts) {
          const Input in = read_input(a, "", ("activations of '" + name + "'").c_str());
          if (in.cuda) throw Error("activations of '" + name + "' must be in host memory");
          o.tensor_activations[name] = host_tensor(in).to_f32();
        }
        JobControl job;
        struct Out {
          PlanTable table;
          std::optional<BudgetChoice> choice;
          std::vector<ParetoPoint> curve;
          std::string plan;
        };
        const Out r = run_job(job, progress, [&] {
          Out out;
          out.table = build_plan_table(model, o, &job);
          if (budget >= 0 || budget_bytes >= 0) {
            const uint64_t cap = budget_bytes >= 0 ? 8 * static_cast<uint64_t>(budget_bytes)
                                                   : budget_bits_for(out.table, budget);
            out.choice = choose_or_refuse(out.table, cap, &job);
            out.plan = plan_to_json(plan_from_choice(out.table, *out.choice));
          }
          if (points > 0) out.curve = pareto_curve(out.table, points, &job);
          return out;
        });
        nb::dict d;
        d["table"] = table_dict(r.table);
        // For castscope-cli plan and the app, which solve this same table themselves.
        d["table_json"] = plan_table_to_json(r.table);
        if (r.choice) {
          nb::list picks;
          for (size_t i = 0; i < r.table.tensors.size(); ++i) {
            const PlanOption& po =
                r.table.tensors[i].options[static_cast<size_t>(r.choice->option[i])];
            picks.append(r.table.candidates[static_cast<size_t>(po.candidate)]);
          }
          nb::dict c;
          c["budget_bits"] = r.choice->budget_bits;
          c["bits"] = r.choice->bits;
          c["bits_per_weight"] = r.choice->bits_per_weight(r.table);
          c["error"] = r.choice->error;
          c["min_bits"] = r.choice->min_bits;
          c["nodes"] = r.choice->nodes;
          c["dtypes"] = picks;
          d["choice"] = c;
          d["plan"] = r.plan;
        }
        nb::list curve;
        for (const ParetoPoint& p : r.curve) {
          nb::dict e;
          e["bits"] = p.bits;
          e["bits_per_weight"] = p.bits_per_weight;
          e["predicted_error"] = p.error;
          e["chosen"] = r.choice && p.bits == r.choice->bits;
          curve.append(e);
        }
        d["pareto"] = curve;
        return d;
      },
      "model"_a, "candidates"_a, "budget"_a, "budget_bytes"_a, "points"_a, "axis"_a, "round"_a,
      "scale_mode"_a, "device"_a, "include_1d"_a, "include_embeddings"_a, "role_weights"_a,
      "relative"_a, "synthetic"_a, "tokens"_a, "activations"_a, "sensitivity"_a,
      "progress"_a.none());
}

}  // namespace castscope::py
