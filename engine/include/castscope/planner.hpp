// The budget planner (docs/planning.md): one datatype per tensor from a candidate set, chosen so
// the model's total size stays within a budget and the sum of the tensors' predicted output
// errors is the smallest possible. The choice is an exact multiple-choice knapsack.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "castscope/storage_bits.hpp"

namespace castscope {

// ---------------------------------------------------------------------------------------------
// Multiple-choice knapsack: from every group pick exactly one item, total size <= capacity,
// smallest total error.

struct KnapsackItem {
  uint64_t size = 0;
  double error = 0;  // finite, >= 0
};

struct KnapsackSolution {
  bool feasible = false;
  std::vector<int> choice;  // per group, index into its items
  uint64_t size = 0;
  double error = 0;
  uint64_t min_size = 0;  // the smallest total size any choice has
  uint64_t nodes = 0;     // search nodes visited
};

struct KnapsackOptions {
  // The LP bound of the groups not yet decided is read from per-depth tables (fast) unless they
  // would hold more than this many entries (16 bytes each); then it is computed at every node.
  uint64_t max_table_entries = 4u << 20;
};

// Exact: branch and bound over the groups with the bound of the LP relaxation (docs/planning.md
// proves that no better choice is pruned). Throws Error for a group without items or an item of
// non-finite or negative error; Cancelled from job.
KnapsackSolution solve_mckp(const std::vector<std::vector<KnapsackItem>>& groups, uint64_t capacity,
                            JobControl* job = nullptr, const KnapsackOptions& opt = {});

// ---------------------------------------------------------------------------------------------
// The planner.

// mxfp4e2, nvfp4, q4_k, mxfp6e2, q6_k, mxfp8e4, q8_0, bfloat16.
const std::vector<std::string>& default_budget_candidates();

// How much more a tensor's error counts by its role in a transformer block: 2 for the value
// projection, the MLP's down projection and the output head (their errors reach the residual
// stream unnormalized: the weights llama.cpp's mixes give more bits), 1 otherwise.
double role_weight(const std::string& tensor_name);

// A candidate as given: a datatype, or "D@METHOD" (the model map's column names) for datatype D
// quantized with METHOD (parse_method_spec: rtn | gptq | mse | awq | four-over-six), the other
// method options from `base`. Error naming a malformed text.
struct PlanCandidate {
  std::string dtype;  // the datatype text as given
  MethodOptions method;
};
PlanCandidate parse_plan_candidate(const std::string& text, const MethodOptions& base = {});

struct BudgetPlanOptions {
  // Datatypes, or datatype x method pairs "D@METHOD" (PlanCandidate).
  std::vector<std::string> candidates = default_budget_candidates();
  // The options of every method candidate (damping, block, grid...), its method set per
  // candidate.
  MethodOptions method_options;
  // Calibration inputs [tokens, in] of a weight by name (an empty tensor where there are none):
  // what gptq / awq candidates quantize with, and the activations every candidate of that
  // weight is scored on (ahead of the file's and synthetic ones), so a method candidate's error
  // is its error on the calibration (all its rows feed the method; `tokens` of them the score).
  std::function<Tensor(const std::string&)> calib;
  bool include_1d = false;          // norms and biases are kept unless asked
  bool include_embeddings = false;  // token / position embeddings are kept unless asked
  CastOptions cast;                 // round, scale mode, axis (per tensor), device
  // The layout the plan is for: each tensor's candidates are those it holds along the tensor's
  // axis (layout_refusal); the others are listed in PlanTensor::failed with the reason.
  std::optional<Layout> layout;
  bool role_weights = true;
  // Projections that vLLM fuses into one weight (fused_group_of) get one datatype unless this is
  // set: the choice is made for the group as a whole.
  bool split_fused = false;
  // Each tensor's errors divided by its own output energy (relative, the default), so that
  // tensors of any scale and size compare on one footing; false: absolute squared errors.
  bool relative = true;
  // Activations of individual tensors by name, [..., len] along the tensor's quantization axis
  // (the inputs its matrix product sees, e.g. collected from the model's runtime); they take
  // precedence over the file's and the synthetic ones.
  std::map<std::string, Tensor> tensor_activations;
  // Per tensor, a factor its errors are multiplied by: how strongly its own error reaches the
  // model's output, measured end to end (castscope.plan's sensitivity); 1 where not given.
  std::map<std::string, double> tensor_sensitivity;
  // Activations: a file's [tokens, features] apply to every tensor whose quantization axis has
  // that length; synthetic ones (synthetic_activations with these parameters) to every tensor.
  Tensor activations;
  bool synthetic = false;
  int64_t tokens = 64;  // rows of activations used (0: all of a file's)
  int outliers = 8;
  double outlier_scale = 50;
  uint64_t seed = 1;
};

// One candidate on one tensor.
struct PlanOption {
  int candidate = 0;      // index into PlanTable::candidates
  uint64_t bits = 0;      // storage_bits
  double error = 0;       // the predicted output error (docs/planning.md)
  double weight_sse = 0;  // sum of (q - w)^2
  double snr_db = 0;      // of the weight
};

struct PlanTensor {
  std::string name;
  Shape shape;
  int64_t numel = 0;
  std::string axis;                 // the quantization axis every candidate was cast on (resolved)
  std::string predictor;            // "activations" or "weights"
  double role = 1;                  // role_weight, or 1 without role weights
  double sensitivity = 1;           // BudgetPlanOptions::tensor_sensitivity, or 1
  double energy = 0;                // ||X W^T||^2 / (T mean(X^2)) with activations, else ||W||^2
  std::vector<PlanOption> options;  // the candidates that cast this tensor
  std::vector<std::pair<std::string, std::string>> failed;  // candidate, why it did not cast
};

struct PlanTable {
  std::vector<std::string> candidates;  // as given
  std::vector<PlanTensor> tensors;      // the tensors the planner chooses for
  int64_t values = 0;                   // their elements: bits per weight divide by this
  // Tensors kept as stored (not considered, or no candidate casts them).
  std::vector<std::pair<std::string, std::string>> kept;  // name, reason
  uint64_t kept_bits = 0;
  std::string activations;   // "model" (per tensor), "file", "synthetic" or "none"
  bool relative = true;      // errors divided by each tensor's energy
  bool split_fused = false;  // BudgetPlanOptions::split_fused
  // The options of its method candidates (BudgetPlanOptions::method_options): the plan's rules
  // record them. Not in the table's JSON (its candidates are datatypes or rtn there).
  MethodOptions method_options;
};

// Casts every tensor the planner considers (auto_considers) to every candidate. Progress by
// tensor; Cancelled from job; Error naming a bad candidate or an unreadable tensor.
PlanTable build_plan_table(const io::Model& model, const BudgetPlanOptions& o,
                           JobControl* job = nullptr);

struct BudgetChoice {
  bool feasible = false;
  uint64_t budget_bits = 0;
  std::vector<int> option;  // per tensor, index into its options
  uint64_t bits = 0;        // total of the chosen options
  double error = 0;         // total predicted error
  uint64_t min_bits = 0;    // the smallest plan the candidates allow
  uint64_t nodes = 0;
  double bits_per_weight(const PlanTable& t) const {
    return t.values ? static_cast<double>(bits) / static_cast<double>(t.values) : 0.0;
  }
};

// The budget in bits for a bits-per-weight figure over the table's values (rounded down).
uint64_t budget_bits_for(const PlanTable& t, double bits_per_weight);
// The exact optimum within budget_bits; infeasible (with min_bits) when nothing fits.
BudgetChoice choose_within(const PlanTable& t, uint64_t budget_bits, JobControl* job = nullptr);
// choose_within, or Error "budget ... is below the smallest plan ...: N bits per weight
// (M bytes)" naming the smallest size that fits.
BudgetChoice choose_or_refuse(const PlanTable& t, uint64_t budget_bits, JobControl* job = nullptr);

struct ParetoPoint {
  uint64_t bits = 0;
  double bits_per_weight = 0;
  double error = 0;
};
// Optimal plans from the smallest size to the largest useful one: the exact optimum at `points`
// budgets spread evenly over that range, repeats dropped. Every point is Pareto-optimal (no plan
// of at most its bits has less predicted error); ordered by bits.
std::vector<ParetoPoint> pareto_curve(const PlanTable& t, int points = 48,
                                      JobControl* job = nullptr);

// The table as JSON and back, exactly (every double round-trips; non-finite SNRs as "inf" /
// "-inf" / "nan"): how a table built with the model's runtime activations in Python reaches the
// CLI and the app, which then solve it with the same solver. Error naming what is malformed.
std::string plan_table_to_json(const PlanTable& t);
PlanTable plan_table_from_json(const std::string& text);

// Exact-name rules for the chosen datatypes (default keep), with the budget and the predicted
// error recorded (ExportPlan::budget).
ExportPlan plan_from_choice(const PlanTable& t, const BudgetChoice& c);

}  // namespace castscope
