// Methods in plans: a rule's "method" read and written (older plans read as rtn), datatype x method
// candidates in the budget planner scored on the calibration, plan_from_choice and plan_from_map
// writing the method, and exports that run it (awq refused where the layout has no place for its
// pre-quant scale).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "castscope/error.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/planner.hpp"
#include "castscope/storage_bits.hpp"
#include "test_seed.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

const char* kName = "layers.0.mlp.down_proj.weight";

// Inputs with neighbouring channels correlated: GPTQ has something to gain over rtn.
Tensor correlated(int64_t tokens, int64_t width, uint64_t seed) {
  Tensor x = test::normal({tokens, width}, seed);
  float* p = x.mutable_ptr<float>();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 1; c < width; ++c) p[t * width + c] += 0.8f * p[t * width + c - 1];
  return x;
}

Tensor first_rows(const Tensor& x, int64_t rows) {
  const int64_t w = x.shape()[1];
  Tensor r = Tensor::empty(DType::F32, {rows, w});
  std::memcpy(r.mutable_ptr<float>(), x.ptr<float>(), sizeof(float) * rows * w);
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(PlanMethods, RuleMethodReadWritten) {
  const ExportPlan p = parse_plan(R"({"default": "keep", "rules": [
      {"pattern": "*.q_proj.weight", "dtype": "nvfp4", "method": "gptq",
       "method_options": {"damp": 0.05, "block": 64, "act_order": true, "static_groups": true}},
      {"pattern": "*.k_proj.weight", "dtype": "nvfp4", "method": "four-over-six"},
      {"pattern": "*.v_proj.weight", "dtype": "mxfp4e2"}]})",
                                  "p.json");
  ASSERT_EQ(p.rules.size(), 3u);
  ASSERT_TRUE(p.rules[0].method);
  EXPECT_EQ(p.rules[0].method->method, Method::GPTQ);
  EXPECT_EQ(p.rules[0].method->damp, 0.05);
  EXPECT_EQ(p.rules[0].method->block, 64);
  EXPECT_TRUE(p.rules[0].method->act_order);
  EXPECT_TRUE(p.rules[0].method->static_groups);
  ASSERT_TRUE(p.rules[1].method);
  EXPECT_EQ(p.rules[1].method->method, Method::MSE);
  EXPECT_TRUE(p.rules[1].method->four_over_six);
  EXPECT_FALSE(p.rules[2].method);  // a rule without "method" (every older plan): rtn
  // Written and read back, the options stay.
  const ExportPlan q = parse_plan(plan_to_json(p), "q.json");
  ASSERT_TRUE(q.rules[0].method && q.rules[1].method);
  EXPECT_EQ(q.rules[0].method->damp, 0.05);
  EXPECT_EQ(q.rules[0].method->block, 64);
  EXPECT_TRUE(q.rules[1].method->four_over_six);
  EXPECT_EQ(q.rules[1].method->method, Method::MSE);
  EXPECT_FALSE(q.rules[2].method);
  io::TensorInfo info;
  info.name = "model.layers.0.self_attn.q_proj.weight";
  info.dtype = "F32";
  info.shape = {64, 64};
  EXPECT_EQ(q.method_for(info).method, Method::GPTQ);
  info.name = "model.layers.0.self_attn.v_proj.weight";
  EXPECT_EQ(q.method_for(info).method, Method::RTN);
  info.name = "other";
  EXPECT_EQ(q.method_for(info).method, Method::RTN);
  // Bad methods and options are named with their rule.
  auto refuses = [](const char* text, const char* what) {
    try {
      parse_plan(text, "bad.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rule 0"), std::string::npos) << e.what();
    }
  };
  refuses(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "method": "obq"}]})", "'obq'");
  refuses(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "method_options": {}}]})",
          "needs a \"method\"");
  refuses(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "method": "gptq",
              "method_options": {"damping": 1}}]})",
          "method_options.damping");
  refuses(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "method": "gptq",
              "method_options": {"block": 0}}]})",
          "method_options.block");
  refuses(R"({"rules": [{"pattern": "*", "axis": "1:", "method": "gptq"}]})", "needs a \"dtype\"");
}

TEST(PlanMethods, BudgetChoosesDatatypeAndMethod) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor w = test::normal({48, 256}, seed, 0.02);
  const Tensor x = correlated(256, 256, seed + 1);
  MemoryModel model("mem.safetensors");
  model.add(kName, w);
  BudgetPlanOptions o;
  o.candidates = {"mxfp4e2", "nvfp4", "nvfp4@gptq", "nvfp4@four-over-six", "nvfp4@awq"};
  o.calib = [&](const std::string& n) { return n == kName ? x : Tensor(); };
  const PlanTable t = build_plan_table(model, o);
  ASSERT_EQ(t.tensors.size(), 1u);
  const PlanTensor& pt = t.tensors[0];
  EXPECT_EQ(t.activations, "calibration");
  EXPECT_EQ(pt.predictor, "activations");
  ASSERT_EQ(pt.options.size(), 5u) << (pt.failed.empty() ? "" : pt.failed[0].second);
  const DataType nv = DataType::parse("nvfp4");
  CastOptions a;
  a.mode = CastMode::Actual;
  const uint64_t nv_bits = storage_bits(nv, w.shape(), resolve_axis(a, w.shape()));
  EXPECT_EQ(pt.options[1].bits, nv_bits);
  EXPECT_EQ(pt.options[2].bits, nv_bits);  // a method stores what its datatype stores
  EXPECT_EQ(pt.options[3].bits, nv_bits);
  EXPECT_EQ(pt.options[4].bits, nv_bits + 32 * 256);  // awq: its float32 pre-quant scale
  // A method candidate's error is its output error on the calibration (the first `tokens` rows
  // score it), relative to the layer's output there; role 2 for a down projection.
  MethodOptions g;
  g.method = Method::GPTQ;
  const Tensor q = method_values(quantize(w, nv, a, g, {x}, kName));
  const double rel = calibration_rel_error(first_rows(x, o.tokens), w, q, a);
  EXPECT_NEAR(pt.options[2].error, 2.0 * rel * rel, 1e-4 * pt.options[2].error);
  EXPECT_LT(pt.options[2].error, pt.options[1].error);
  // At NVFP4's size the planner takes the method of least error among those that fit.
  const BudgetChoice c = choose_within(t, nv_bits);
  ASSERT_TRUE(c.feasible);
  const int best = pt.options[2].error < pt.options[3].error ? 2 : 3;
  EXPECT_EQ(c.option[0], best);
  const ExportPlan p = parse_plan(plan_to_json(plan_from_choice(t, c)), "plan.json");
  ASSERT_EQ(p.rules.size(), 1u);
  EXPECT_EQ(p.rules[0].target->str(), nv.str());
  ASSERT_TRUE(p.rules[0].method);
  EXPECT_EQ(method_spec(*p.rules[0].method), best == 2 ? "gptq" : "four-over-six");
  // Without calibration the gptq and awq candidates cannot cast: each says why.
  o.calib = {};
  const PlanTable u = build_plan_table(model, o);
  ASSERT_EQ(u.tensors.size(), 1u);
  EXPECT_EQ(u.tensors[0].options.size(), 3u);
  ASSERT_EQ(u.tensors[0].failed.size(), 2u);
  EXPECT_NE(u.tensors[0].failed[0].second.find("calibration"), std::string::npos);
  EXPECT_THROW(parse_plan_candidate("nvfp4@obq"), Error);
  EXPECT_THROW(parse_plan_candidate("@gptq"), Error);
  EXPECT_EQ(parse_plan_candidate("nvfp4").method.method, Method::RTN);
}

TEST(PlanMethods, MapColumnWritesMethod) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor w = test::normal({32, 128}, seed, 0.02);
  MemoryModel model;
  model.add(kName, w);
  MapOptions mo;
  mo.dtypes = {"nvfp4"};
  MethodOptions rtn, mse;
  mse.method = Method::MSE;
  mse.grid = 50;
  mo.methods = {rtn, mse};
  const ModelMap m = sweep_model(model, mo);
  ASSERT_EQ(m.columns.size(), 2u);
  const ExportPlan p = plan_from_map(m, {1});
  ASSERT_EQ(p.rules.size(), 1u);
  ASSERT_TRUE(p.rules[0].method);
  EXPECT_EQ(p.rules[0].method->method, Method::MSE);
  EXPECT_EQ(p.rules[0].method->grid, 50);
  EXPECT_FALSE(plan_from_map(m, {0}).rules[0].method);
}

TEST(PlanMethods, ExportRunsTheRulesMethod) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor w = test::normal({32, 256}, seed, 0.02);
  const Tensor x = correlated(128, 256, seed + 1);
  MemoryModel model;
  model.add(kName, w);
  const std::string dir = ::testing::TempDir();
  const DataType d = DataType::parse("uint4_float32_int8_t128");
  // (compressed-tensors: tests/interop/test_method_export.py, against its own decompressors.)
  for (const char* layout : {"native"}) {
    SCOPED_TRACE(layout);
    const DataType& dt = d;
    const ExportPlan p = parse_plan(std::string(R"({"rules": [{"pattern": "*", "dtype": ")") +
                                        dt.str() + R"(", "method": "gptq"}]})",
                                    "gptq.json");
    ExportOptions eo;
    eo.layout = parse_layout(layout);
    eo.cast.device = Device::CPU;
    eo.calib = [&](const std::string& n) { return n == kName ? x : Tensor(); };
    const std::string out = dir + "castscope_plan_methods.safetensors";
    export_model(model, out, p, eo);
    const std::vector<io::PackedTensor> back = io::load_packed(out);
    ASSERT_EQ(back.size(), 1u);
    const Tensor got = upcast(back[0].result);
    CastOptions a;
    a.mode = CastMode::Actual;
    MethodOptions g;
    g.method = Method::GPTQ;
    const Tensor want = method_values(quantize(w, dt, a, g, {x}, kName));
    EXPECT_TRUE(same_bits(got, want));
    EXPECT_FALSE(same_bits(got, cast(w, dt).values.to_f32()));
  }
  const ExportPlan awq = parse_plan(R"({"rules": [{"pattern": "*", "dtype": "nvfp4",
                                        "method": "awq"}]})",
                                    "awq.json");
  ExportOptions eo;
  eo.calib = [&](const std::string&) { return x; };
  try {
    export_model(model, dir + "castscope_plan_awq.safetensors", awq, eo);
    ADD_FAILURE() << "awq exported without a place for its pre-quant scale";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre-quant scale"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(kName), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace castscope
