// Auto-assignment of per-layer datatypes from a candidate set (docs/export-formats.md, "Plan
// files").
#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "castscope/autoplan.hpp"
#include "castscope/metrics.hpp"
#include "castscope/storage_bits.hpp"

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

std::vector<RankedCandidate> rank_candidates(const std::vector<std::string>& texts,
                                             int64_t axis_length) {
  std::vector<RankedCandidate> c;
  for (const std::string& s : texts) {
    DataType d;
    try {
      d = DataType::parse(s);
    } catch (const Error& e) {
      throw Error("candidate '" + s + "': " + e.what());
    }
    c.push_back({s, d, d.bits_per_value(axis_length)});
  }
  std::stable_sort(c.begin(), c.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return a.bits < b.bits;
  });
  return c;
}

std::vector<RankedCandidate> rank_candidates(const std::vector<std::string>& texts,
                                             const Shape& shape, const CastOptions& o) {
  std::vector<RankedCandidate> c = rank_candidates(texts, axis_length(o, shape));
  const double n = static_cast<double>(std::max<int64_t>(numel(shape), 1));
  for (RankedCandidate& r : c) {
    try {
      r.bits = static_cast<double>(storage_bits(r.dtype, shape, o)) / n;
    } catch (const Error&) {
      r.bits = std::numeric_limits<double>::infinity();
    }
  }
  std::stable_sort(c.begin(), c.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return a.bits < b.bits;
  });
  return c;
}

void cast_each(const Tensor& xf, const std::vector<DataType>& dtypes, const CastOptions& o,
               JobControl* job, const std::function<bool(size_t, const CastResult&)>& on_cast,
               const std::function<void(size_t, const std::string&)>& on_skip) {
  CastOptions co = resolve_axis(o, xf.shape());
  co.mode = CastMode::Virtual;
  co.job = nullptr;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (job) job->check();
    CastResult r;
    try {
      r = cast(xf, dtypes[i], co);
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      if (on_skip) on_skip(i, e.what());
      continue;
    }
    if (!on_cast(i, r)) return;
  }
}

AutoPlanPick cheapest_meeting(const std::string& name, const Tensor& x, double target_db,
                              const std::vector<RankedCandidate>& candidates, const CastOptions& o,
                              JobControl* job) {
  const CastOptions base = resolve_axis(o, x.shape());
  AutoPlanPick best{
      name, "", 0, -std::numeric_limits<double>::infinity(), false, AxisSpec::from(base).str()};
  const Tensor xf = x.dtype() == DType::F32 ? x : x.to_f32();
  std::vector<DataType> dts;
  for (const RankedCandidate& c : candidates) dts.push_back(c.dtype);
  cast_each(xf, dts, base, job, [&](size_t i, const CastResult& r) {
    const Stats s = compute_stats(xf, r.values, r.counts.clipped);
    const RankedCandidate& c = candidates[i];
    if (s.snr_db >= target_db) {
      best = {name, c.name, c.bits, s.snr_db, true, best.axis};
      return false;
    }
    if (s.snr_db > best.snr_db) best = {name, c.name, c.bits, s.snr_db, false, best.axis};
    return true;
  });
  return best;
}

AutoPlanPick auto_pick(const std::string& name, const Tensor& x, const AutoPlanOptions& o,
                       JobControl* job) {
  const CastOptions base = resolve_axis(o.cast, x.shape());
  return cheapest_meeting(name, x, o.snr_target_db, rank_candidates(o.candidates, x.shape(), base),
                          base, job);
}

std::vector<AutoPlanPick> auto_assign(const io::Model& model, const AutoPlanOptions& o,
                                      JobControl* job) {
  try {
    rank_candidates(o.candidates, 1);  // a bad candidate fails before any work
  } catch (const Error& e) {
    throw Error(std::string("auto-assign ") + e.what());
  }
  std::vector<AutoPlanPick> picks;
  const auto& ts = model.tensors();
  for (size_t i = 0; i < ts.size(); ++i) {
    if (job) job->check();
    if (!auto_considers(ts[i], o)) continue;
    try {
      // Each tensor along its own resolved layout unless the options name an axis.
      AutoPlanOptions ot = o;
      ot.cast = io::cast_options_for(o.cast, ts[i]);
      if (o.layout) {
        // Only what the target layout holds on this tensor; none: the tensor is kept.
        ot.candidates.clear();
        for (const std::string& c : o.candidates)
          if (layout_refusal(*o.layout, DataType::parse(c), ts[i], o.cast).empty())
            ot.candidates.push_back(c);
        if (ot.candidates.empty()) {
          io::release_pages(model, ts[i].name);
          continue;
        }
      }
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
