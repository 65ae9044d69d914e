// Per-layer auto-assignment: for every tensor worth casting, the cheapest datatype of a candidate
// set (the formats the user's hardware runs) whose SNR reaches a target, as a plan.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"

namespace castscope {

// MXFP8, MXFP6, MXFP4, NVFP4, FP8 per channel and in 128x128 blocks, BF16.
const std::vector<std::string>& default_auto_candidates();

struct AutoPlanOptions {
  double snr_target_db = 30.0;
  std::vector<std::string> candidates = default_auto_candidates();  // datatype strings
  bool include_1d = false;          // norms and biases are kept unless asked
  bool include_embeddings = false;  // token / position embeddings are kept unless asked
  CastOptions cast;                 // round, scale mode, axis (axis_auto: per tensor), device
  // The layout the plan is for: each tensor's candidates are those it holds (layout_refusal).
  std::optional<Layout> layout;
};

// Token and position embedding tables, by the names the common stacks give them.
bool is_embedding_name(const std::string& name);
// Whether auto-assignment picks a datatype for this tensor (float storage, rank >= 2 unless
// include_1d, not an embedding unless include_embeddings).
bool auto_considers(const io::TensorInfo& info, const AutoPlanOptions& o);

// A candidate datatype as the user gave it (a registry name stays a name in a plan), parsed, with
// its bits per value on one tensor.
struct RankedCandidate {
  std::string name;
  DataType dtype;
  double bits = 0;
};
// The candidates parsed (Error naming a bad one) and ordered by bits per value at this length of
// the quantization axis, cheapest first; equal bits keep the given order.
std::vector<RankedCandidate> rank_candidates(const std::vector<std::string>& texts,
                                             int64_t axis_length);
// The same on one tensor: bits per value are storage_bits(d, shape, o) / values (partial tiles and
// ggml blocks whole, the tensor scale counted); a candidate that cannot lay out along the
// tensor's axis is ranked last, where its cast says why.
std::vector<RankedCandidate> rank_candidates(const std::vector<std::string>& texts,
                                             const Shape& shape, const CastOptions& o);

// Casts xf (float32) to each datatype in turn, virtual values with `o` resolved for the tensor;
// `on_cast(i, result)` returns false to stop. A datatype whose layout does not fit this tensor (a
// 2-D tile on a vector) goes to `on_skip(i, why)` instead. Cancelled passes through.
void cast_each(const Tensor& xf, const std::vector<DataType>& dtypes, const CastOptions& o,
               JobControl* job, const std::function<bool(size_t, const CastResult&)>& on_cast,
               const std::function<void(size_t, const std::string&)>& on_skip = {});

struct AutoPlanPick {
  std::string tensor;
  std::string dtype;  // the candidate as given; empty: no candidate casts this tensor
  double bits = 0;
  double snr_db = 0;
  bool met = false;  // false: no candidate reached the target; dtype is the best SNR found
  std::string axis;  // the quantization axis it was cast on (AxisSpec::str(), resolved)
};
// The candidates tried in the order given: the first whose SNR reaches target_db, else the one of
// best SNR (met false). The one search behind auto_pick and the app's plan decisions.
AutoPlanPick cheapest_meeting(const std::string& name, const Tensor& x, double target_db,
                              const std::vector<RankedCandidate>& candidates, const CastOptions& o,
                              JobControl* job = nullptr);
// The candidates tried cheapest first (bits per value at the length of the tensor's quantization
// axis, flattened where o.cast says so).
AutoPlanPick auto_pick(const std::string& name, const Tensor& x, const AutoPlanOptions& o,
                       JobControl* job = nullptr);
// auto_pick over every tensor auto_considers; throws Error naming a bad candidate string.
std::vector<AutoPlanPick> auto_assign(const io::Model& model, const AutoPlanOptions& o,
                                      JobControl* job = nullptr);
// A plan that keeps everything except the picked tensors (one exact-name rule each).
ExportPlan plan_from_picks(const std::vector<AutoPlanPick>& picks);

}  // namespace castscope
