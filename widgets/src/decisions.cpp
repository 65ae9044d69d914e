#include "castscope/widgets/decisions.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "castscope/metrics_json.hpp"

namespace castscope::widgets {

std::vector<size_t> pareto_front(const std::vector<TradeoffPoint>& pts) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!std::isfinite(pts[i].bits) || std::isnan(pts[i].snr_db)) continue;
    bool dominated = false;
    for (size_t j = 0; j < pts.size() && !dominated; ++j) {
      if (j == i || std::isnan(pts[j].snr_db)) continue;
      const bool no_worse = pts[j].bits <= pts[i].bits && pts[j].snr_db >= pts[i].snr_db;
      const bool better = pts[j].bits < pts[i].bits || pts[j].snr_db > pts[i].snr_db;
      // Exact duplicates: keep the first so the front has no repeated points.
      dominated = no_worse && (better || j < i);
    }
    if (!dominated) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return pts[a].bits < pts[b].bits; });
  return idx;
}

std::vector<ScaleModeRun> compare_scale_modes(const Tensor& x, const DataType& d, CastOptions o,
                                              const std::string& name, JobControl* job,
                                              DeviceInput* input) {
  const ScaleMode modes[] = {ScaleMode::Floor, ScaleMode::Ceil, ScaleMode::Midmax,
                             ScaleMode::Option3, ScaleMode::TopBinade};
  std::vector<ScaleModeRun> runs;
  for (ScaleMode m : modes) {
    if (job) job->check();
    o.scale_mode = m;
    ScaleModeRun r;
    r.mode = m;
    AnalysisOptions ao;
    ao.keep_values = false;
    r.analysis = analyze(x, d, o, name, ao, nullptr, input);
    runs.push_back(std::move(r));
    if (job) job->report(static_cast<double>(runs.size()) / 5.0);
  }
  const TileMap* base = runs[0].analysis->tiles ? &*runs[0].analysis->tiles : nullptr;
  for (ScaleModeRun& r : runs) {
    if (!base || !r.analysis->tiles) continue;
    const TileMap& t = *r.analysis->tiles;
    r.differs.assign(t.scale_code.size(), 0);
    for (size_t k = 0; k < t.scale_code.size() && k < base->scale_code.size(); ++k) {
      r.differs[k] = t.scale_code[k] != base->scale_code[k];
      r.tiles_differ += r.differs[k];
    }
  }
  return runs;
}

std::vector<Candidate> registry_candidates(int64_t channel_length) {
  std::vector<std::string> names;
  for (const RegistryEntry& e : registry()) names.push_back(e.name);
  return rank_candidates(names, channel_length);
}

AutoPick cheapest_meeting(const Tensor& x, double target_db,
                          const std::vector<Candidate>& candidates, const CastOptions& o,
                          JobControl* job) {
  const AutoPlanPick p = castscope::cheapest_meeting("", x, target_db, candidates, o, job);
  return {p.dtype, p.bits, p.snr_db, p.met};
}

std::string glob_escape(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[')
      out += std::string("[") + c + "]";
    else
      out += c;
  }
  return out;
}

std::string metrics_csv(const std::vector<const Analysis*>& rows) {
  std::string s =
      "tensor,shape,dtype,scale_mode,round,bits_per_value,mse,snr_db,max_abs_err,clipped,clipped_"
      "pct,"
      "nonfinite_in,nonfinite_out,zeros_out,bias,count\n";
  for (const Analysis* a : rows) {
    std::string shape = shape_str(a->shape);
    std::replace(shape.begin(), shape.end(), ',', 'x');
    char buf[512];
    std::snprintf(
        buf, sizeof buf, "%s,%s,%s,%s,%s,%.6g,%.9g,%.9g,%.9g,%lld,%.6g,%lld,%lld,%lld,%.9g,%lld\n",
        a->tensor.c_str(), shape.c_str(), a->dtype.str().c_str(), to_string(a->options.scale_mode),
        to_string(a->options.round), a->bits_per_value, a->stats.mse, a->stats.snr_db,
        a->stats.max_abs_err, static_cast<long long>(a->stats.clipped), a->stats.clipped_pct(),
        static_cast<long long>(a->stats.nonfinite_in),
        static_cast<long long>(a->stats.nonfinite_out), static_cast<long long>(a->stats.zeros_out),
        a->stats.mean_err, static_cast<long long>(a->stats.count));
    s += buf;
  }
  return s;
}

std::string metrics_json(const std::vector<const Analysis*>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Analysis* a : rows) {
    nlohmann::json j;
    put_analysis_cast(j, *a);
    j["bits_per_value"] = a->bits_per_value;
    metrics_json::put_stats(j, a->stats);
    arr.push_back(j);
  }
  return arr.dump(2) + "\n";
}

}  // namespace castscope::widgets
