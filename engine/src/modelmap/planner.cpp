// The budget planner (castscope/planner.hpp, docs/planning.md): the predicted error of every
// candidate on every tensor, and the exact choice under a size budget.
#include "castscope/planner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "castscope/autoplan.hpp"
#include "castscope/fused.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/metrics.hpp"
#include "core/parallel.hpp"

namespace castscope {

const std::vector<std::string>& default_budget_candidates() {
  static const std::vector<std::string> k = {"mxfp4e2", "nvfp4",   "q4_k", "mxfp6e2",
                                             "q6_k",    "mxfp8e4", "q8_0", "bfloat16"};
  return k;
}

PlanCandidate parse_plan_candidate(const std::string& text, const MethodOptions& base) {
  PlanCandidate c;
  c.dtype = text;
  const size_t at = text.rfind('@');
  if (at == std::string::npos) return c;
  c.dtype = text.substr(0, at);
  if (c.dtype.empty()) throw Error("plan: candidate '" + text + "' names no datatype before '@'");
  try {
    c.method = parse_method_spec(text.substr(at + 1), base);
  } catch (const Error& e) {
    throw Error("plan: candidate '" + text + "': " + e.what());
  }
  return c;
}

double role_weight(const std::string& tensor_name) {
  std::string l = tensor_name;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // HF Llama / Mistral / Qwen, GGUF, Meta's originals, GPT-2 / OPT-style MLP outputs.
  for (const char* k : {"v_proj", "attn_v.", ".wv.", "down_proj", "ffn_down", ".w2.", "mlp.c_proj",
                        ".fc2.", "lm_head", "output.weight"})
    if (l.find(k) != std::string::npos) return 2.0;
  return 1.0;
}

namespace {

// sum over rows r and tokens t of (x_t . e_r)^2, e = q - w laid out [rows, len], x [tokens, len].
// Each row's sum is kept apart and the rows added in order, so the result does not depend on the
// thread count.
double output_sse(const float* x, int64_t tokens, const std::vector<float>& e, int64_t len,
                  int threads, JobControl* job) {
  const int64_t rows = static_cast<int64_t>(e.size()) / len;
  std::vector<double> per_row(static_cast<size_t>(rows));
  detail::parallel_for(rows, 16, threads, job, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* b = e.data() + r * len;
      double acc = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        const float* a = x + t * len;
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= len; k += 8)
          for (int j = 0; j < 8; ++j) lane[j] += a[k + j] * b[k + j];
        for (; k < len; ++k) lane[k % 8] += a[k] * b[k];
        const double y = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        acc += y * y;
      }
      per_row[static_cast<size_t>(r)] = acc;
    }
  });
  double s = 0;
  for (double v : per_row) s += v;
  return s;
}

struct Activations {
  const float* x = nullptr;
  int64_t tokens = 0;
  double mean_square = 1;
};

class ActivationSource {
 public:
  explicit ActivationSource(const BudgetPlanOptions& o) : o_(o) {
    if (o.activations.defined() && o.activations.numel() > 0) {
      Tensor a = o.activations.to_f32();
      const int64_t f = a.shape().empty() ? 1 : a.shape().back();
      file_ = a.reshaped({a.numel() / f, f});
    }
    for (const auto& [name, x] : o.tensor_activations) {
      if (!x.defined() || x.numel() == 0 || x.rank() < 1)
        throw Error("activations of '" + name + "' are empty");
      Tensor a = x.to_f32();
      const int64_t f = a.shape().back();
      own_.emplace(name, a.reshaped({a.numel() / f, f}));
    }
  }
  // Activations for tensor `name` whose quantization axis has `len` values: its own (given by
  // name), else synthetic ones or the file's of that width; none when there are none.
  // `calib`: the tensor's calibration inputs (BudgetPlanOptions::calib), ahead of all others.
  std::optional<Activations> get(const std::string& name, int64_t len, const Tensor& calib = {}) {
    const Tensor* t = nullptr;
    if (calib.defined() && calib.numel() > 0) {
      const int64_t f = calib.shape().back();
      if (f != len)
        throw Error("its calibration inputs have " + std::to_string(f) +
                    " features, its quantization axis " + std::to_string(len) + " values");
      calib_ = calib.to_f32().reshaped({calib.numel() / f, f});
      t = &calib_;
    } else if (auto own = own_.find(name); own != own_.end()) {
      if (own->second.shape()[1] != len)
        throw Error("its activations have " + std::to_string(own->second.shape()[1]) +
                    " features, its quantization axis " + std::to_string(len) + " values");
      t = &own->second;
    } else if (o_.synthetic) {
      auto it = synth_.find(len);
      if (it == synth_.end()) {
        const int outliers = static_cast<int>(std::min<int64_t>(o_.outliers, len));
        it = synth_
                 .emplace(len, synthetic_activations(o_.tokens > 0 ? o_.tokens : 64, len, outliers,
                                                     o_.outlier_scale, o_.seed))
                 .first;
      }
      t = &it->second;
    } else if (file_.defined() && file_.shape()[1] == len) {
      t = &file_;
    }
    if (!t) return std::nullopt;
    Activations a;
    a.x = t->ptr<float>();
    a.tokens = t->shape()[0];
    if (o_.tokens > 0) a.tokens = std::min(a.tokens, o_.tokens);
    double ss = 0;
    for (int64_t i = 0; i < a.tokens * len; ++i) ss += static_cast<double>(a.x[i]) * a.x[i];
    a.mean_square = ss / static_cast<double>(a.tokens * len);
    if (!(a.mean_square > 0) || !std::isfinite(a.mean_square))
      throw Error("activations of " + std::to_string(len) +
                  " features are all zero or not finite: they cannot weight an error");
    return a;
  }
  bool any() const { return o_.synthetic || file_.defined() || !own_.empty() || o_.calib; }

 private:
  const BudgetPlanOptions& o_;
  Tensor file_;
  std::map<std::string, Tensor> own_;
  std::map<int64_t, Tensor> synth_;
  Tensor calib_;
};

}  // namespace

PlanTable build_plan_table(const io::Model& model, const BudgetPlanOptions& o, JobControl* job) {
  PlanTable t;
  t.candidates = o.candidates;
  t.method_options = o.method_options;
  std::vector<DataType> dts;
  std::vector<MethodOptions> methods;  // per candidate
  for (const std::string& s : o.candidates) {
    const PlanCandidate pc = parse_plan_candidate(s, o.method_options);
    try {
      dts.push_back(DataType::parse(pc.dtype));
    } catch (const Error& e) {
      throw Error("plan: candidate '" + s + "': " + e.what());
    }
    methods.push_back(pc.method);
  }
  if (dts.empty()) throw Error("plan: no candidate datatypes");
  ActivationSource acts(o);
  t.activations = o.calib                         ? "calibration"
                  : !o.tensor_activations.empty() ? "model"
                  : o.synthetic                   ? "synthetic"
                  : acts.any()                    ? "file"
                                                  : "none";
  t.relative = o.relative;
  t.split_fused = o.split_fused;
  AutoPlanOptions consider;
  consider.include_1d = o.include_1d;
  consider.include_embeddings = o.include_embeddings;
  const auto& ts = model.tensors();
  for (size_t ti = 0; ti < ts.size(); ++ti) {
    if (job) job->check();
    const io::TensorInfo& info = ts[ti];
    if (!auto_considers(info, consider)) {
      t.kept.emplace_back(info.name, "not considered (1-D, embedding or not floating point)");
      t.kept_bits += 8 * info.nbytes;
      continue;
    }
    try {
      const Tensor w = model.load(info.name).to_f32();
      // The tensor's resolved layout (an override included) when the axis is automatic, as the
      // map and the export take it.
      const CastOptions c = io::cast_options_for(o.cast, info);
      const CastOptions r = resolve_axis(c, info.shape);
      PlanTensor pt;
      pt.name = info.name;
      pt.shape = info.shape;
      pt.numel = numel(info.shape);
      pt.axis = AxisSpec::from(r).str();
      pt.role = o.role_weights ? role_weight(info.name) : 1.0;
      if (auto it = o.tensor_sensitivity.find(info.name); it != o.tensor_sensitivity.end()) {
        if (!(it->second >= 0) || !std::isfinite(it->second))
          throw Error("its sensitivity must be a finite number >= 0");
        pt.sensitivity = it->second;
      }
      const int64_t len = std::max<int64_t>(axis_length(r, info.shape), 1);
      const int rank = static_cast<int>(info.shape.size());
      const int ax = r.axis < 0 ? r.axis + rank : r.axis;
      // The error matrix reads as [rows, len] when the reduction is the trailing axes (a linear
      // [out, in], a conv [O, I, k...] flattened from axis 1); it is transposed when the
      // reduction is the leading ones (a MatMul B [K, N], GPT-2's Conv1D [in, out], a Keras
      // conv [k..., Cin, Cout]). Any other axis has no matrix product to weight.
      const bool last = (r.flatten && !r.lead) || ax == rank - 1;
      const bool transposed = !last && (r.lead || ax == 0);
      const Tensor calib = o.calib ? o.calib(info.name) : Tensor();
      std::optional<Activations> a;
      if (last || transposed) a = acts.get(info.name, len, calib);
      pt.predictor = a ? "activations" : "weights";
      const float* pw = w.ptr<float>();
      // What a relative error divides by: the layer's output energy ||X W^T||^2 with
      // activations, the weight's ||W||^2 without (docs/planning.md, "The predictor").
      std::vector<float> e(static_cast<size_t>(pt.numel));
      auto to_rows = [&](const float* q) {
        if (transposed) {
          const int64_t out = pt.numel / len;
          for (int64_t k = 0; k < len; ++k)
            for (int64_t c = 0; c < out; ++c)
              e[static_cast<size_t>(c * len + k)] = (q ? q[k * out + c] : 0.0f) - pw[k * out + c];
        } else {
          for (int64_t k = 0; k < pt.numel; ++k)
            e[static_cast<size_t>(k)] = (q ? q[k] : 0.0f) - pw[k];
        }
      };
      double energy = 0;
      if (a) {
        to_rows(nullptr);  // -W: its output energy is that of W
        energy = output_sse(a->x, a->tokens, e, len, o.cast.threads, job) /
                 (static_cast<double>(a->tokens) * a->mean_square);
      } else {
        for (int64_t k = 0; k < pt.numel; ++k) energy += static_cast<double>(pw[k]) * pw[k];
      }
      pt.energy = energy;
      // A tensor of zeros casts exactly under every candidate: its errors stay 0 either way.
      const double scale = o.relative && energy > 0 ? 1.0 / energy : 1.0;
      // Only the candidates the target layout holds on this tensor take part; the rtn ones are
      // cast together, each method candidate on its own.
      std::vector<bool> layout_holds(dts.size(), true);
      std::vector<DataType> held;
      std::vector<size_t> idx;
      for (size_t i = 0; i < dts.size(); ++i) {
        if (o.layout) {
          std::string why = layout_refusal(*o.layout, dts[i], info, o.cast);
          if (!why.empty()) {
            pt.failed.emplace_back(o.candidates[i], std::move(why));
            layout_holds[i] = false;
            continue;
          }
        }
        if (methods[i].method != Method::RTN) continue;
        held.push_back(dts[i]);
        idx.push_back(i);
      }
      // One candidate's values scored: its weight error, SNR and predicted output error.
      auto score = [&](size_t i, const Tensor& values, int64_t clipped, uint64_t extra_bits) {
        const Tensor q = values.to_f32();
        const float* pq = q.ptr<float>();
        double sse = 0;
        for (int64_t k = 0; k < pt.numel; ++k) {
          const float d = pq[k] - pw[k];
          sse += static_cast<double>(d) * d;
        }
        if (!std::isfinite(sse)) {
          pt.failed.emplace_back(o.candidates[i], "its error is not finite");
          return;
        }
        PlanOption po;
        po.candidate = static_cast<int>(i);
        po.bits = storage_bits(dts[i], info.shape, r) + extra_bits;
        po.weight_sse = sse;
        po.snr_db = compute_stats(w, values, clipped).snr_db;
        double err = sse;
        if (a) {
          to_rows(pq);
          err = output_sse(a->x, a->tokens, e, len, o.cast.threads, job) /
                (static_cast<double>(a->tokens) * a->mean_square);
        }
        po.error = pt.role * pt.sensitivity * err * scale;
        if (!std::isfinite(po.error)) {
          pt.failed.emplace_back(o.candidates[i], "its output error is not finite");
          return;
        }
        pt.options.push_back(po);
      };
      cast_each(
          w, held, c, job,
          [&](size_t h, const CastResult& cr) {
            score(idx[h], cr.values, cr.counts.clipped, 0);
            return true;
          },
          [&](size_t h, const std::string& why) {
            pt.failed.emplace_back(o.candidates[idx[h]], why);
          });
      for (size_t i = 0; i < dts.size(); ++i) {
        if (methods[i].method == Method::RTN || !layout_holds[i]) continue;
        if (job) job->check();
        try {
          const MethodResult mr = quantize(w, dts[i], c, methods[i], {calib}, info.name);
          // awq stores its pre-quant scale beside the codes: one float32 per input channel.
          const uint64_t extra = mr.pre_quant_scale.defined()
                                     ? 32 * static_cast<uint64_t>(mr.pre_quant_scale.numel())
                                     : 0;
          score(i, method_values(mr), mr.cast.counts.clipped, extra);
        } catch (const Cancelled&) {
          throw;
        } catch (const Error& err) {
          pt.failed.emplace_back(o.candidates[i], err.what());
        }
      }
      // The options in candidate order, as the table always listed them.
      std::sort(pt.options.begin(), pt.options.end(),
                [](const PlanOption& x, const PlanOption& y) { return x.candidate < y.candidate; });
      if (pt.options.empty()) {
        t.kept.emplace_back(info.name, o.layout && !pt.failed.empty()
                                           ? "no candidate the " +
                                                 std::string(to_string(*o.layout)) +
                                                 " layout holds casts it (" + pt.failed[0].first +
                                                 ": " + pt.failed[0].second + ")"
                                           : std::string("no candidate casts it"));
        t.kept_bits += 8 * info.nbytes;
      } else {
        t.values += pt.numel;
        t.tensors.push_back(std::move(pt));
      }
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      throw Error("tensor '" + info.name + "' of '" + model.path() + "': " + e.what());
    }
    io::release_pages(model, info.name);
    if (job) job->report(static_cast<double>(ti + 1) / static_cast<double>(ts.size()));
  }
  return t;
}

uint64_t budget_bits_for(const PlanTable& t, double bits_per_weight) {
  if (!(bits_per_weight >= 0) || !std::isfinite(bits_per_weight))
    throw Error("budget: bits per weight must be a finite non-negative number");
  return static_cast<uint64_t>(std::floor(bits_per_weight * static_cast<double>(t.values)));
}

namespace {

// The knapsack's groups: one per tensor, or per fused projection group (its members' options
// of the candidates every member has, sizes and errors summed). members[g]: the tensors of g.
struct Grouping {
  std::vector<std::vector<KnapsackItem>> groups;
  std::vector<std::vector<size_t>> members;
  std::vector<std::vector<int>> candidates;  // per group, the candidate of each item
};

Grouping groups_of(const PlanTable& t) {
  Grouping g;
  std::map<std::string, size_t> fused;
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const std::string f = t.split_fused ? std::string() : fused_group_of(t.tensors[i].name);
    auto it = f.empty() ? fused.end() : fused.find(f);
    if (it != fused.end()) {
      g.members[it->second].push_back(i);
      continue;
    }
    if (!f.empty()) fused[f] = g.members.size();
    g.members.push_back({i});
  }
  for (const std::vector<size_t>& m : g.members) {
    std::vector<KnapsackItem> items;
    std::vector<int> cands;
    for (const PlanOption& po : t.tensors[m[0]].options) {
      KnapsackItem it{0, 0};
      bool all = true;
      for (size_t k : m) {
        const auto& os = t.tensors[k].options;
        auto o = std::find_if(os.begin(), os.end(),
                              [&](const PlanOption& x) { return x.candidate == po.candidate; });
        if (o == os.end()) {
          all = false;
          break;
        }
        it.size += o->bits;
        it.error += o->error;
      }
      if (!all) continue;
      items.push_back(it);
      cands.push_back(po.candidate);
    }
    if (items.empty())
      throw Error("budget: the fused projections " + t.tensors[m[0]].name +
                  " ... have no candidate in common (plan them apart with split_fused)");
    g.groups.push_back(std::move(items));
    g.candidates.push_back(std::move(cands));
  }
  return g;
}

}  // namespace

BudgetChoice choose_within(const PlanTable& t, uint64_t budget_bits, JobControl* job) {
  const Grouping g = groups_of(t);
  const KnapsackSolution s = solve_mckp(g.groups, budget_bits, job);
  BudgetChoice c;
  c.budget_bits = budget_bits;
  c.min_bits = s.min_size;
  c.feasible = s.feasible;
  c.nodes = s.nodes;
  if (!s.feasible) return c;
  c.option.assign(t.tensors.size(), 0);
  for (size_t i = 0; i < g.members.size(); ++i) {
    const int cand = g.candidates[i][static_cast<size_t>(s.choice[i])];
    for (size_t k : g.members[i]) {
      const auto& os = t.tensors[k].options;
      c.option[k] =
          static_cast<int>(std::find_if(os.begin(), os.end(),
                                        [&](const PlanOption& x) { return x.candidate == cand; }) -
                           os.begin());
    }
  }
  c.bits = s.size;
  c.error = s.error;
  return c;
}

BudgetChoice choose_or_refuse(const PlanTable& t, uint64_t budget_bits, JobControl* job) {
  BudgetChoice c = choose_within(t, budget_bits, job);
  if (c.feasible) return c;
  const double v = static_cast<double>(std::max<int64_t>(t.values, 1));
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "budget of %.4f bits per weight (%llu bytes) over %lld weights is below the "
                "smallest plan the candidates allow: %.4f bits per weight (%llu bytes)",
                static_cast<double>(budget_bits) / v,
                static_cast<unsigned long long>(budget_bits / 8), static_cast<long long>(t.values),
                static_cast<double>(c.min_bits) / v,
                static_cast<unsigned long long>((c.min_bits + 7) / 8));
  throw Error(buf);
}

std::vector<ParetoPoint> pareto_curve(const PlanTable& t, int points, JobControl* job) {
  std::vector<ParetoPoint> out;
  if (t.tensors.empty()) return out;
  uint64_t lo = 0, hi = 0;
  for (const PlanTensor& pt : t.tensors) {
    uint64_t mn = UINT64_MAX;
    double least = INFINITY;
    uint64_t at_least = 0;
    for (const PlanOption& po : pt.options) {
      mn = std::min(mn, po.bits);
      // Beyond the least-error option's size more bits buy nothing.
      if (po.error < least || (po.error == least && po.bits < at_least)) {
        least = po.error;
        at_least = po.bits;
      }
    }
    lo += mn;
    hi += at_least;
  }
  const double v = static_cast<double>(std::max<int64_t>(t.values, 1));
  points = std::max(points, 2);
  for (int i = 0; i < points; ++i) {
    if (job) job->check();
    const uint64_t b = lo + static_cast<uint64_t>(static_cast<double>(hi - lo) * i / (points - 1));
    const BudgetChoice c = choose_within(t, i == points - 1 ? hi : b, job);
    if (!c.feasible) continue;
    if (!out.empty() && out.back().bits == c.bits) continue;
    // A budget that buys no less error than a smaller one repeats that one's plan.
    if (!out.empty() && c.error >= out.back().error) continue;
    out.push_back({c.bits, static_cast<double>(c.bits) / v, c.error});
    if (job) job->report(static_cast<double>(i + 1) / points);
  }
  return out;
}

ExportPlan plan_from_choice(const PlanTable& t, const BudgetChoice& c) {
  if (!c.feasible) throw Error("plan: the budget has no plan");
  std::vector<AutoPlanPick> picks;
  std::vector<MethodOptions> methods;
  bool act = false, weights = false;
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const PlanTensor& pt = t.tensors[i];
    const PlanOption& po = pt.options[static_cast<size_t>(c.option[i])];
    AutoPlanPick p;
    p.tensor = pt.name;
    const PlanCandidate pc =
        parse_plan_candidate(t.candidates[static_cast<size_t>(po.candidate)], t.method_options);
    p.dtype = pc.dtype;
    p.axis = pt.axis;
    picks.push_back(p);
    methods.push_back(pc.method);
    (pt.predictor == "activations" ? act : weights) = true;
  }
  ExportPlan plan = plan_from_picks(picks);
  // plan_from_picks writes one rule per pick, in order.
  for (size_t i = 0; i < plan.rules.size() && i < methods.size(); ++i)
    if (methods[i].method != Method::RTN) plan.rules[i].method = methods[i];
  PlanBudget b;
  b.budget_bits = c.budget_bits;
  b.values = t.values;
  b.bits_per_weight = t.values ? static_cast<double>(c.budget_bits) / t.values : 0.0;
  b.plan_bits = c.bits;
  b.predicted_error = c.error;
  b.predictor = act && weights ? "mixed" : act ? "activations" : "weights";
  plan.budget = b;
  return plan;
}

}  // namespace castscope
