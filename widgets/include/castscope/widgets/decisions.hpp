// The computations behind the comparison and planning panels (no ImGui, no GL): Pareto fronts,
// scale-mode comparisons, the cheapest datatype meeting an SNR target, metrics exports.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "castscope/autoplan.hpp"
#include "castscope/widgets/analysis.hpp"

namespace castscope::widgets {

struct TradeoffPoint {
  double bits = 0;
  double snr_db = 0;
};
// Indices of the points no other point beats (fewer or equal bits and higher or equal SNR, one
// of them strictly), ordered by bits.
std::vector<size_t> pareto_front(const std::vector<TradeoffPoint>& pts);

// The five scale-selection rules run on one tensor and datatype.
struct ScaleModeRun {
  ScaleMode mode = ScaleMode::Floor;
  std::shared_ptr<const Analysis> analysis;
  std::vector<uint8_t> differs;  // per tile: scale code differs from the floor rule's
  int64_t tiles_differ = 0;
};
std::vector<ScaleModeRun> compare_scale_modes(const Tensor& x, const DataType& d, CastOptions o,
                                              const std::string& name, JobControl* job = nullptr,
                                              DeviceInput* input = nullptr);

// Registry datatypes that can be tried on a tensor, cheapest first (bits per value with the
// tensor's channel length; equal bits keep registry order).
using Candidate = RankedCandidate;
std::vector<Candidate> registry_candidates(int64_t channel_length);

struct AutoPick {
  std::string dtype;  // registry name; empty when no candidate applies to the tensor
  double bits = 0;
  double snr_db = 0;
  bool met = false;  // false: no candidate reached the target; dtype is the best SNR found
};
// Tries candidates in order (cheapest first) and returns the first whose SNR reaches target_db
// (castscope::cheapest_meeting). Candidates that cannot cast this tensor are skipped.
AutoPick cheapest_meeting(const Tensor& x, double target_db,
                          const std::vector<Candidate>& candidates, const CastOptions& o,
                          JobControl* job = nullptr);

// Glob pattern that matches exactly `name` (escapes * ? [ as one-character classes).
std::string glob_escape(const std::string& name);

// One analysis' metrics as CSV (header + one row) or JSON.
std::string metrics_csv(const std::vector<const Analysis*>& rows);
std::string metrics_json(const std::vector<const Analysis*>& rows);
// The fields that say which cast an analysis is, as every JSON form of it writes them (the metrics
// export, the app's state). Templated on the JSON type, as metrics_json.hpp is.
template <typename Json>
void put_analysis_cast(Json& j, const Analysis& a) {
  j["tensor"] = a.tensor;
  j["shape"] = a.shape;
  j["dtype"] = a.dtype.str();
  j["scale_mode"] = to_string(a.options.scale_mode);
  j["round"] = to_string(a.options.round);
}

}  // namespace castscope::widgets
