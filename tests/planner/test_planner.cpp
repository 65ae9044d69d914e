// The budget planner: exact storage sizes, the knapsack's optimality against brute force and a
// dynamic program, the predicted errors, refusals and the plan file's budget keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "castscope/autoplan.hpp"
#include "castscope/export.hpp"
#include "castscope/metrics.hpp"
#include "castscope/planner.hpp"
#include "test_seed.hpp"

using namespace castscope;

namespace {

struct Best {
  bool feasible = false;
  double error = std::numeric_limits<double>::infinity();
  uint64_t size = 0;
};

Best brute_force(const std::vector<std::vector<KnapsackItem>>& g, uint64_t cap) {
  Best b;
  std::vector<size_t> at(g.size(), 0);
  while (true) {
    uint64_t s = 0;
    double e = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      s += g[i][at[i]].size;
      e += g[i][at[i]].error;
    }
    if (s <= cap && e < b.error) b = {true, e, s};
    size_t i = 0;
    while (i < g.size() && ++at[i] == g[i].size()) at[i++] = 0;
    if (i == g.size()) return b;
  }
}

// Exact DP over every capacity (small integer sizes only).
Best dynamic_program(const std::vector<std::vector<KnapsackItem>>& g, uint64_t cap) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(cap + 1, 0.0);  // least error of the groups so far within c
  for (const auto& items : g) {
    std::vector<double> next(cap + 1, inf);
    for (uint64_t c = 0; c <= cap; ++c)
      for (const KnapsackItem& it : items)
        if (it.size <= c && best[c - it.size] + it.error < next[c])
          next[c] = best[c - it.size] + it.error;
    best = std::move(next);
  }
  Best b;
  if (std::isfinite(best[cap])) b = {true, best[cap], 0};
  return b;
}

void check_solution(const std::vector<std::vector<KnapsackItem>>& g, uint64_t cap,
                    const KnapsackSolution& s, const Best& ref, const std::string& what) {
  ASSERT_EQ(s.feasible, ref.feasible) << what;
  uint64_t min_size = 0;
  for (const auto& items : g) {
    uint64_t m = UINT64_MAX;
    for (const KnapsackItem& it : items) m = std::min(m, it.size);
    min_size += m;
  }
  EXPECT_EQ(s.min_size, min_size) << what;
  if (!ref.feasible) return;
  ASSERT_EQ(s.choice.size(), g.size()) << what;
  uint64_t size = 0;
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_GE(s.choice[i], 0);
    ASSERT_LT(static_cast<size_t>(s.choice[i]), g[i].size());
    size += g[i][static_cast<size_t>(s.choice[i])].size;
    err += g[i][static_cast<size_t>(s.choice[i])].error;
  }
  EXPECT_EQ(size, s.size) << what;
  EXPECT_LE(size, cap) << what;
  EXPECT_NEAR(err, s.error, 1e-12 * std::max(1.0, err)) << what;
  EXPECT_NEAR(s.error, ref.error, 1e-11 * std::max(1.0, ref.error)) << what;
}

std::vector<std::vector<KnapsackItem>> random_instance(std::mt19937_64& rng, int groups,
                                                       int max_items, uint64_t max_size) {
  std::uniform_int_distribution<int> ni(1, max_items);
  std::uniform_int_distribution<uint64_t> sz(1, max_size);
  std::uniform_real_distribution<double> er(0.0, 10.0);
  std::bernoulli_distribution tie(0.15);
  std::vector<std::vector<KnapsackItem>> g(static_cast<size_t>(groups));
  for (auto& items : g) {
    const int n = ni(rng);
    for (int i = 0; i < n; ++i) {
      KnapsackItem it{sz(rng), er(rng)};
      // Equal sizes, equal errors and dominated items all occur in real tables.
      if (!items.empty() && tie(rng)) it.size = items.back().size;
      if (!items.empty() && tie(rng)) it.error = items.back().error;
      items.push_back(it);
    }
  }
  return g;
}

uint64_t random_capacity(std::mt19937_64& rng, const std::vector<std::vector<KnapsackItem>>& g) {
  uint64_t lo = 0, hi = 0;
  for (const auto& items : g) {
    uint64_t a = UINT64_MAX, b = 0;
    for (const KnapsackItem& it : items) {
      a = std::min(a, it.size);
      b = std::max(b, it.size);
    }
    lo += a;
    hi += b;
  }
  // Sometimes below the smallest plan, to check the refusal.
  std::uniform_int_distribution<uint64_t> c(lo > 3 ? lo - 3 : 0, hi + 2);
  return c(rng);
}

Tensor random_tensor(const Shape& s, std::mt19937_64& rng, double scale, bool heavy) {
  Tensor t = Tensor::empty(DType::F32, s);
  float* p = t.mutable_ptr<float>();
  std::normal_distribution<float> n(0.0f, static_cast<float>(scale));
  std::student_t_distribution<float> st(3.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = heavy ? static_cast<float>(scale) * st(rng) : n(rng);
  return t;
}

}  // namespace

TEST(Knapsack, MatchesBruteForceOnSmallRandomInstances) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const int groups = 1 + trial % 7;
    const auto g = random_instance(rng, groups, 5, trial % 2 ? 1000 : 12);
    const uint64_t cap = random_capacity(rng, g);
    const Best ref = brute_force(g, cap);
    const std::string what = "trial " + std::to_string(trial) + " cap " + std::to_string(cap);
    check_solution(g, cap, solve_mckp(g, cap), ref, what + " (tables)");
    KnapsackOptions lean;
    lean.max_table_entries = 0;  // the bound computed at every node
    check_solution(g, cap, solve_mckp(g, cap, nullptr, lean), ref, what + " (per node)");
  }
}

TEST(Knapsack, MatchesDynamicProgramOnLargerInstances) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed ^ 0x5eed);
  for (int trial = 0; trial < 30; ++trial) {
    const auto g = random_instance(rng, 40, 8, 60);
    const uint64_t cap = random_capacity(rng, g);
    const Best ref = dynamic_program(g, cap);
    const std::string what = "trial " + std::to_string(trial) + " cap " + std::to_string(cap);
    check_solution(g, cap, solve_mckp(g, cap), ref, what);
    KnapsackOptions lean;
    lean.max_table_entries = 0;
    check_solution(g, cap, solve_mckp(g, cap, nullptr, lean), ref, what + " (per node)");
  }
}

TEST(Knapsack, ScalesToHundredsOfTensors) {
  // Errors falling geometrically with size, as quantization errors do (about 4x per bit), on
  // 600 groups of 8: the search must stay near the LP's choice.
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  std::uniform_int_distribution<int> dim(1, 64);
  const double bits[] = {4.25, 4.5, 4.5, 6.25, 6.5625, 8.25, 8.5, 16};
  std::vector<std::vector<KnapsackItem>> g(600);
  uint64_t lo = 0, hi = 0;
  for (auto& items : g) {
    const uint64_t n = 4096u * static_cast<uint64_t>(dim(rng));
    const double scale = u(rng) * static_cast<double>(n);
    for (double b : bits)
      items.push_back(
          {static_cast<uint64_t>(b * static_cast<double>(n)), scale * std::pow(4.0, -b) * u(rng)});
    lo += items.front().size;
    hi += items.back().size;
  }
  for (double f : {0.01, 0.1, 0.3, 0.5, 0.9}) {
    const uint64_t cap = lo + static_cast<uint64_t>(f * static_cast<double>(hi - lo));
    const KnapsackSolution s = solve_mckp(g, cap);
    ASSERT_TRUE(s.feasible);
    EXPECT_LE(s.size, cap);
    EXPECT_LT(s.nodes, 5000000u) << f;
  }
}

TEST(Knapsack, RejectsBadGroups) {
  EXPECT_THROW(solve_mckp({{{1, 1.0}}, {}}, 10), Error);
  EXPECT_THROW(solve_mckp({{{1, std::nan("")}}}, 10), Error);
  EXPECT_THROW(solve_mckp({{{1, -1.0}}}, 10), Error);
  const KnapsackSolution none = solve_mckp({{{5, 1.0}, {7, 0.5}}, {{3, 2.0}}}, 7);
  EXPECT_FALSE(none.feasible);
  EXPECT_EQ(none.min_size, 8u);
}

TEST(StorageBits, ExactCountsOfCodesAndScales) {
  CastOptions o;
  EXPECT_EQ(storage_bits(DataType::parse("mxfp4e2"), {64, 256}, o), 64u * 256 * 4 + 64 * 8 * 8);
  // A row of 40 is one whole tile of 32 and one partial tile, each with its scale.
  EXPECT_EQ(storage_bits(DataType::parse("mxfp4e2"), {3, 40}, o), 3u * 40 * 4 + 3 * 2 * 8);
  // NVFP4: e4m3 per 16 plus the one float32 tensor scale.
  EXPECT_EQ(storage_bits(DataType::parse("nvfp4"), {16, 64}, o), 16u * 64 * 4 + 16 * 4 * 8 + 32);
  EXPECT_EQ(storage_bits(DataType::parse("q4_k"), {2, 512}, o), 2u * 2 * 144 * 8);
  EXPECT_EQ(storage_bits(DataType::parse("q8_0"), {4, 64}, o), 4u * 2 * 34 * 8);
  EXPECT_EQ(storage_bits(DataType::parse("bfloat16"), {5, 7}, o), 5u * 7 * 16);
  // 128x128 blocks over [200, 300]: 2 x 3 blocks, partial ones included.
  EXPECT_EQ(storage_bits(DataType::parse("e4m3fn_float32_t128_t128"), {200, 300}, o),
            200u * 300 * 8 + 2 * 3 * 32);
  // Along axis 0 the tiles run down the columns.
  CastOptions a0;
  AxisSpec::parse("0").apply(a0);
  EXPECT_EQ(storage_bits(DataType::parse("mxfp4e2"), {40, 3}, a0), 3u * 40 * 4 + 3 * 2 * 8);
  // A conv weight under the automatic axis: I*kh*kw = 36 values per output channel.
  CastOptions au;
  AxisSpec::parse("auto").apply(au);
  EXPECT_EQ(storage_bits(DataType::parse("mxfp8e4"), {8, 4, 3, 3}, au), 8u * 36 * 8 + 8 * 2 * 8);
}

TEST(StorageBits, AgreesWithBitsPerValueOnAlignedShapes) {
  // Where every tile is whole, the exact size is bits_per_value times the count, plus at most
  // one tensor-wide scale (bits_per_value leaves it out).
  const Shape s = {256, 512};
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    uint64_t bits = 0;
    try {
      bits = storage_bits(d, s, {});
    } catch (const Error&) {
      continue;
    }
    const double expect = d.bits_per_value(s.back()) * static_cast<double>(numel(s));
    EXPECT_GE(static_cast<double>(bits), expect - 1e-6) << e.name;
    EXPECT_LE(static_cast<double>(bits), expect + 64 + 1e-6) << e.name;
  }
}

namespace {

MemoryModel small_model(uint64_t seed) {
  std::mt19937_64 rng(seed);
  MemoryModel m;
  m.add("model.embed_tokens.weight", random_tensor({16, 64}, rng, 1.0, false));
  m.add("model.layers.0.self_attn.q_proj.weight", random_tensor({64, 64}, rng, 0.02, false));
  m.add("model.layers.0.self_attn.v_proj.weight", random_tensor({32, 64}, rng, 0.05, true));
  m.add("model.layers.0.mlp.up_proj.weight", random_tensor({128, 64}, rng, 0.03, false));
  m.add("model.layers.0.mlp.down_proj.weight", random_tensor({64, 128}, rng, 0.01, true));
  m.add("model.layers.0.input_layernorm.weight", random_tensor({64}, rng, 1.0, false));
  m.add("lm_head.weight", random_tensor({16, 64}, rng, 0.2, true));
  return m;
}

BudgetPlanOptions small_options() {
  BudgetPlanOptions o;
  o.candidates = {"mxfp4e2", "nvfp4", "mxfp6e2", "mxfp8e4", "bfloat16"};
  o.cast.device = Device::CPU;
  return o;
}

// The least error within the budget over every combination of the table's options.
// A weight's output error against its own product with activations X [tokens, k], in double:
// the sums over tokens and outputs of (X (Q - W))^2 and of (X W)^2, where element (out, i) of the
// weight W and of its cast Q stands at out * out_stride + i * k_stride.
struct OutputSums {
  double err = 0, energy = 0;
};
OutputSums output_sums(const float* px, const float* pq, const float* pw, int64_t tokens,
                       int64_t outs, int64_t k, int64_t out_stride, int64_t k_stride) {
  OutputSums s;
  for (int64_t tk = 0; tk < tokens; ++tk)
    for (int64_t r = 0; r < outs; ++r) {
      double y = 0, yw = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t at = r * out_stride + i * k_stride;
        y += double(px[tk * k + i]) * (double(pq[at]) - pw[at]);
        yw += double(px[tk * k + i]) * pw[at];
      }
      s.err += y * y;
      s.energy += yw * yw;
    }
  return s;
}

Best table_brute_force(const PlanTable& t, uint64_t cap) {
  std::vector<std::vector<KnapsackItem>> g;
  for (const PlanTensor& pt : t.tensors) {
    std::vector<KnapsackItem> items;
    for (const PlanOption& po : pt.options) items.push_back({po.bits, po.error});
    g.push_back(items);
  }
  return brute_force(g, cap);
}

// choose_within() at each budget (bits per weight): feasible exactly where the brute force is,
// within the budget, and its error the brute force's optimum.
// The brute force chooses per tensor, so fused projections are planned apart here.
void expect_optimal_within(const PlanTable& fused_table, std::initializer_list<double> bpws) {
  PlanTable t = fused_table;
  t.split_fused = true;
  for (double bpw : bpws) {
    const uint64_t cap = budget_bits_for(t, bpw);
    const BudgetChoice c = choose_within(t, cap);
    const Best ref = table_brute_force(t, cap);
    ASSERT_EQ(c.feasible, ref.feasible) << bpw;
    if (!ref.feasible) continue;
    EXPECT_LE(c.bits, cap) << bpw;
    EXPECT_NEAR(c.error, ref.error, 1e-11 * std::max(ref.error, 1e-300)) << bpw;
  }
}

}  // namespace

TEST(Planner, OptimalOnASmallModelAgainstBruteForce) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const MemoryModel m = small_model(seed);
  for (bool synthetic : {false, true}) {
    BudgetPlanOptions o = small_options();
    o.synthetic = synthetic;
    o.seed = seed;
    PlanTable t = build_plan_table(m, o);
    t.split_fused = true;  // the brute force below chooses per tensor
    ASSERT_EQ(t.tensors.size(), 5u) << "norms and embeddings are kept";
    EXPECT_EQ(t.kept.size(), 2u);
    EXPECT_EQ(t.values, 64 * 64 + 32 * 64 + 128 * 64 + 64 * 128 + 16 * 64);
    for (const PlanTensor& pt : t.tensors) {
      EXPECT_EQ(pt.options.size(), 5u) << pt.name;
      EXPECT_EQ(pt.predictor, synthetic ? "activations" : "weights");
      for (const PlanOption& po : pt.options)
        EXPECT_EQ(po.bits,
                  storage_bits(DataType::parse(o.candidates[po.candidate]), pt.shape, o.cast));
    }
    expect_optimal_within(t, {4.25, 4.4, 4.5, 5.0, 6.0, 6.3, 8.25, 9.0, 12.0, 16.0});
    // The curve: increasing bits, decreasing error, every point the optimum at its size.
    const std::vector<ParetoPoint> curve = pareto_curve(t, 24);
    ASSERT_GE(curve.size(), 2u);
    for (size_t i = 0; i < curve.size(); ++i) {
      const Best ref = table_brute_force(t, curve[i].bits);
      EXPECT_NEAR(curve[i].error, ref.error, 1e-11 * ref.error) << i;
      if (i) {
        EXPECT_GT(curve[i].bits, curve[i - 1].bits);
        EXPECT_LT(curve[i].error, curve[i - 1].error);
      }
    }
  }
}

TEST(Planner, PredictedErrorsAreTheDocumentedSums) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  MemoryModel m;
  const Tensor w = random_tensor({24, 96}, rng, 0.05, true);
  m.add("model.layers.0.mlp.down_proj.weight", w);
  const Tensor x = random_tensor({10, 96}, rng, 1.5, true);
  for (int form = 0; form < 4; ++form) {
    const bool with_act = form & 1, relative = form & 2;
    SCOPED_TRACE(std::string(with_act ? "activations" : "weights") +
                 (relative ? ", relative" : ", absolute"));
    BudgetPlanOptions o;
    o.candidates = {"mxfp4e2", "q8_0"};
    o.cast.device = Device::CPU;
    o.relative = relative;
    if (with_act) o.activations = x;
    const PlanTable t = build_plan_table(m, o);
    ASSERT_EQ(t.tensors.size(), 1u);
    const PlanTensor& pt = t.tensors[0];
    EXPECT_EQ(pt.role, 2.0) << "a down projection";
    ASSERT_EQ(pt.options.size(), 2u);
    for (const PlanOption& po : pt.options) {
      const Tensor q = cast(w, DataType::parse(o.candidates[po.candidate]), o.cast).values;
      const float* pw = w.ptr<float>();
      const float* pq = q.ptr<float>();
      double sse = 0;
      for (int64_t i = 0; i < w.numel(); ++i) sse += (double(pq[i]) - pw[i]) * (pq[i] - pw[i]);
      EXPECT_NEAR(po.weight_sse, sse, 1e-9 * sse);
      double ww = 0;
      for (int64_t i = 0; i < w.numel(); ++i) ww += double(pw[i]) * pw[i];
      double expect = 2.0 * sse / (relative ? ww : 1.0);
      if (with_act) {
        const float* px = x.ptr<float>();
        double ms = 0;
        for (int64_t i = 0; i < x.numel(); ++i) ms += double(px[i]) * px[i];
        ms /= static_cast<double>(x.numel());
        const OutputSums out = output_sums(px, pq, pw, 10, 24, 96, 96, 1);  // W [24, 96]
        expect = relative ? 2.0 * out.err / out.energy : 2.0 * out.err / (10.0 * ms);
      }
      EXPECT_NEAR(po.error, expect, 1e-4 * expect);
    }
  }
}

// A weight [K, N] reduced over its first axis (an ONNX MatMul's B, GPT-2's Conv1D) with its own
// activations [T, K]: the predicted error is the relative error of X W, not of W^T.
TEST(Planner, OwnActivationsAlongALeadingAxis) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  MemoryModel m;
  const Tensor w = random_tensor({96, 40}, rng, 0.05, true);
  m.add(name, w);
  Tensor x = random_tensor({12, 96}, rng, 1.0, false);
  for (int64_t tk = 0; tk < 12; ++tk) x.mutable_ptr<float>()[tk * 96 + 7] *= 30.0f;
  BudgetPlanOptions o;
  o.candidates = {"mxfp4e2", "mxfp6e2"};
  o.cast.device = Device::CPU;
  AxisSpec::parse("0").apply(o.cast);
  o.tensor_activations[name] = x;
  o.tokens = 0;
  const PlanTable t = build_plan_table(m, o);
  EXPECT_EQ(t.activations, "model");
  ASSERT_EQ(t.tensors.size(), 1u);
  EXPECT_EQ(t.tensors[0].predictor, "activations");
  EXPECT_EQ(t.tensors[0].axis, "0");
  for (const PlanOption& po : t.tensors[0].options) {
    const Tensor q = cast(w, DataType::parse(o.candidates[po.candidate]), o.cast).values;
    const float *pw = w.ptr<float>(), *pq = q.ptr<float>(), *px = x.ptr<float>();
    const OutputSums out = output_sums(px, pq, pw, 12, 40, 96, 1, 40);  // W [96, 40]
    EXPECT_NEAR(po.error, out.err / out.energy, 1e-4 * out.err / out.energy)
        << o.candidates[po.candidate];
  }
  // Activations of the wrong width name the mismatch.
  o.tensor_activations[name] = random_tensor({12, 40}, rng, 1.0, false);
  try {
    build_plan_table(m, o);
    ADD_FAILURE() << "activations of 40 features for an axis of 96 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("40 features"), std::string::npos) << e.what();
  }
}

TEST(Planner, RefusesABudgetBelowTheSmallestPlan) {
  const MemoryModel m = small_model(test::test_seed());
  const PlanTable t = build_plan_table(m, small_options());
  const uint64_t min = choose_within(t, 0).min_bits;
  EXPECT_EQ(min, [&] {
    uint64_t s = 0;
    for (const PlanTensor& pt : t.tensors) {
      uint64_t a = UINT64_MAX;
      for (const PlanOption& po : pt.options) a = std::min(a, po.bits);
      s += a;
    }
    return s;
  }());
  EXPECT_TRUE(choose_or_refuse(t, min).feasible);
  try {
    choose_or_refuse(t, min - 1);
    ADD_FAILURE() << "a budget one bit short must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("smallest plan"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4.2500 bits per weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string((min + 7) / 8) + " bytes"), std::string::npos) << msg;
  }
  EXPECT_THROW(budget_bits_for(t, -1), Error);
  BudgetPlanOptions bad = small_options();
  bad.candidates = {"mxfp4e2", "no_such_type"};
  EXPECT_THROW(build_plan_table(m, bad), Error);
}

// The Python planner's table reaches the CLI and the app as JSON: every double must come back
// with the same bits, or their choice could differ from castscope.plan's.
TEST(Planner, TableJsonRoundTripsExactly) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const MemoryModel m = small_model(seed);
  BudgetPlanOptions o = small_options();
  o.synthetic = true;
  o.seed = seed;
  o.tensor_sensitivity["model.layers.0.mlp.down_proj.weight"] = 0.1 + 1.0 / 3.0;
  PlanTable t = build_plan_table(m, o);
  t.tensors[0].options[0].snr_db = INFINITY;  // a weight cast without error
  t.tensors[0].options[1].snr_db = -INFINITY;
  t.tensors[1].options[0].snr_db = NAN;
  t.tensors[1].failed.emplace_back("q4_k", "a row of 64 \"is\" short");
  const PlanTable r = plan_table_from_json(plan_table_to_json(t));
  auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  EXPECT_EQ(std::tie(r.candidates, r.values, r.kept, r.kept_bits, r.activations, r.relative),
            std::tie(t.candidates, t.values, t.kept, t.kept_bits, t.activations, t.relative))
      << "(candidates, values, kept, kept_bits, activations, relative)";
  ASSERT_EQ(r.tensors.size(), t.tensors.size());
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const PlanTensor &a = t.tensors[i], &b = r.tensors[i];
    EXPECT_EQ(std::tie(b.name, b.shape, b.numel, b.axis, b.predictor),
              std::tie(a.name, a.shape, a.numel, a.axis, a.predictor))
        << "(name, shape, numel, axis, predictor)";
    EXPECT_TRUE(same(b.role, a.role) && same(b.sensitivity, a.sensitivity) &&
                same(b.energy, a.energy))
        << a.name;
    EXPECT_EQ(b.failed, a.failed);
    ASSERT_EQ(b.options.size(), a.options.size());
    for (size_t k = 0; k < a.options.size(); ++k) {
      const PlanOption &x = a.options[k], &y = b.options[k];
      EXPECT_EQ(y.candidate, x.candidate);
      EXPECT_EQ(y.bits, x.bits);
      EXPECT_TRUE(same(y.error, x.error) && same(y.weight_sse, x.weight_sse)) << a.name << k;
      EXPECT_TRUE(same(y.snr_db, x.snr_db) || (std::isnan(x.snr_db) && std::isnan(y.snr_db)))
          << a.name << k;
    }
  }
  const uint64_t cap = budget_bits_for(t, 6.0);
  EXPECT_EQ(choose_within(r, cap).option, choose_within(t, cap).option);
  EXPECT_THROW(plan_table_from_json("{\"candidates\": []}"), Error);
  EXPECT_THROW(plan_table_from_json("not json"), Error);
}

TEST(Planner, PlanFileRecordsTheBudgetAndOldPlansStillRead) {
  const MemoryModel m = small_model(test::test_seed());
  const PlanTable t = build_plan_table(m, small_options());
  const BudgetChoice c = choose_or_refuse(t, budget_bits_for(t, 6.0));
  const ExportPlan p = plan_from_choice(t, c);
  ASSERT_TRUE(p.budget.has_value());
  const ExportPlan back = parse_plan(plan_to_json(p), "round trip");
  ASSERT_TRUE(back.budget.has_value());
  EXPECT_EQ(back.budget->budget_bits, c.budget_bits);
  EXPECT_EQ(back.budget->plan_bits, c.bits);
  EXPECT_EQ(back.budget->values, t.values);
  EXPECT_DOUBLE_EQ(back.budget->predicted_error, c.error);
  EXPECT_EQ(back.budget->predictor, "weights");
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const io::TensorInfo* info = m.find(t.tensors[i].name);
    ASSERT_NE(info, nullptr);
    const std::optional<DataType> d = back.dtype_for(*info);
    ASSERT_TRUE(d.has_value());
    const int cand = t.tensors[i].options[static_cast<size_t>(c.option[i])].candidate;
    EXPECT_EQ(*d, DataType::parse(t.candidates[static_cast<size_t>(cand)])) << info->name;
  }
  const ExportPlan old = parse_plan(R"({"default": "keep", "rules": [{"pattern": "*",
      "dtype": "mxfp4e2"}]})");
  EXPECT_FALSE(old.budget.has_value());
  EXPECT_EQ(plan_to_json(old).find("budget"), std::string::npos);
  EXPECT_THROW(parse_plan(R"({"budget": {"bits_per_weight": 4, "bits": 8, "values": 2}})"), Error);
  EXPECT_THROW(parse_plan(R"({"budget": {"bits_per_weight": -4, "bits": 8, "values": 2},
      "predicted": {"bits": 8, "error": 1}})"),
               Error);
}

TEST(AutoPlan, CheapestMeetingIsTheOneSearch) {
  // auto_pick and the shared search give the same pick on every tensor and target.
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const MemoryModel m = small_model(seed);
  AutoPlanOptions o;
  o.cast.device = Device::CPU;
  for (double target : {10.0, 20.0, 35.0}) {
    o.snr_target_db = target;
    for (const io::TensorInfo& info : m.tensors()) {
      if (!auto_considers(info, o)) continue;
      const Tensor x = m.load(info.name);
      const AutoPlanPick a = auto_pick(info.name, x, o);
      const AutoPlanPick b = cheapest_meeting(
          info.name, x, target, rank_candidates(o.candidates, x.shape().back()), o.cast);
      EXPECT_EQ(a.dtype, b.dtype);
      EXPECT_EQ(a.met, b.met);
      EXPECT_EQ(a.snr_db, b.snr_db);
    }
  }
}

TEST(Planner, OptimalOnTheDemoTensorsAgainstBruteForce) {
  // The four demo tensors of assets/ (Gaussian, a layer with outlier columns, outliers,
  // Student-t), read from their .npy files, with every default candidate.
  MemoryModel m;
  for (const char* n : {"demo_gaussian", "demo_layer", "demo_outliers", "demo_student_t"}) {
    const auto f = io::open_model(std::string(CASTSCOPE_SOURCE_DIR) + "/assets/" + n + ".npy");
    m.add(n, f->load(f->tensors().at(0).name));
  }
  for (bool synthetic : {false, true}) {
    BudgetPlanOptions o;
    o.cast.device = Device::CPU;
    o.synthetic = synthetic;
    const PlanTable t = build_plan_table(m, o);
    ASSERT_EQ(t.tensors.size(), 4u);
    for (const PlanTensor& pt : t.tensors) EXPECT_EQ(pt.options.size(), 8u) << pt.name;
    expect_optimal_within(t, {4.25, 4.3, 4.5, 5.0, 6.0, 6.4, 7.0, 8.25, 8.4, 10.0, 16.0});
  }
}
