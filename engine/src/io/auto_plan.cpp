// Auto-assignment of per-layer datatypes from a candidate set (docs/export-formats.md, "Plan
// files").
#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "castscope/autoplan.hpp"
#include "castscope/metrics.hpp"

namespace castscope {

const std::vector<std::string>& default_auto_candidates() {
  static const std::vector<std::string> k = {
      "mxfp8e4", "mxfp6e2", "mxfp4e2", "nvfp4", "e4m3fn_float32_t0", "e4m3fn_float32_t128_t128",
      "bfloat16"};
  return k;
}

bool is_embedding_name(const std::string& name) {
  std::string l = name;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* k : {"embed", "wte.", "wpe.", "token_embd", "tok_embeddings", "word_embeddings",
                        "position_embeddings"})
    if (l.find(k) != std::string::npos) return true;
  return false;
}

bool auto_considers(const io::TensorInfo& info, const AutoPlanOptions& o) {
  if (!io::is_float_storage(info.dtype) || info.shape.empty()) return false;
  if (info.shape.size() < 2 && !o.include_1d) return false;
  if ((info.layout.embedding || is_embedding_name(info.name)) && !o.include_embeddings)
    return false;
  return true;
}

namespace {

struct Ranked {
  std::string text;  // as the user gave it (a registry name stays a name in the plan)
  DataType dtype;
  double bits;
};

std::vector<Ranked> ranked(const AutoPlanOptions& o, int64_t channel) {
  std::vector<Ranked> c;
  for (const std::string& s : o.candidates) {
    DataType d;
    try {
      d = DataType::parse(s);
    } catch (const Error& e) {
      throw Error("auto-assign candidate '" + s + "': " + e.what());
    }
    c.push_back({s, d, d.bits_per_value(channel)});
  }
  std::stable_sort(c.begin(), c.end(),
                   [](const Ranked& a, const Ranked& b) { return a.bits < b.bits; });
  return c;
}

}  // namespace

AutoPlanPick auto_pick(const std::string& name, const Tensor& x, const AutoPlanOptions& o,
                       JobControl* job) {
  AutoPlanPick best{name, "", 0, -std::numeric_limits<double>::infinity(), false, ""};
  const CastOptions base = resolve_axis(o.cast, x.shape());
  best.axis = AxisSpec::from(base).str();
  const Tensor xf = x.dtype() == DType::F32 ? x : x.to_f32();
  for (const auto& [text, d, bits] : ranked(o, axis_length(base, x.shape()))) {
    if (job) job->check();
    CastOptions co = base;
    co.mode = CastMode::Virtual;
    co.job = nullptr;
    CastResult r;
    try {
      r = cast(xf, d, co);
    } catch (const Cancelled&) {
      throw;
    } catch (const Error&) {
      continue;  // e.g. a 2-D tile on a tensor of rank 1
    }
    const Stats s = compute_stats(xf, r.values, r.counts.clipped);
    if (s.snr_db >= o.snr_target_db) return {name, text, bits, s.snr_db, true, best.axis};
    if (s.snr_db > best.snr_db) best = {name, text, bits, s.snr_db, false, best.axis};
  }
  return best;
}

std::vector<AutoPlanPick> auto_assign(const io::Model& model, const AutoPlanOptions& o,
                                      JobControl* job) {
  ranked(o, 1);  // a bad candidate fails before any work
  std::vector<AutoPlanPick> picks;
  const auto& ts = model.tensors();
  for (size_t i = 0; i < ts.size(); ++i) {
    if (job) job->check();
    if (!auto_considers(ts[i], o)) continue;
    try {
      // Each tensor along its own resolved layout unless the options name an axis.
      AutoPlanOptions ot = o;
      ot.cast = io::cast_options_for(o.cast, ts[i]);
      picks.push_back(auto_pick(ts[i].name, model.load(ts[i].name), ot, job));
    } catch (const Error& e) {
      throw Error("tensor '" + ts[i].name + "' of '" + model.path() + "': " + e.what());
    }
    io::release_pages(model, ts[i].name);
    if (job) job->report(static_cast<double>(i + 1) / static_cast<double>(ts.size()));
  }
  return picks;
}

ExportPlan plan_from_picks(const std::vector<AutoPlanPick>& picks) {
  nlohmann::json rules = nlohmann::json::array();
  for (const AutoPlanPick& p : picks) {
    if (p.dtype.empty()) continue;
    std::string pat;  // the exact name: glob metacharacters as one-character classes
    for (char c : p.tensor)
      pat += (c == '*' || c == '?' || c == '[') ? std::string("[") + c + "]" : std::string(1, c);
    nlohmann::json rule = {{"pattern", pat}, {"dtype", p.dtype}};
    // The plain last axis is every plan's default; any other axis the pick was made on is kept.
    if (!p.axis.empty() && p.axis != "-1") rule["axis"] = p.axis;
    rules.push_back(rule);
  }
  return parse_plan(nlohmann::json({{"default", "keep"}, {"rules", rules}}).dump(), "auto-assign");
}

}  // namespace castscope
