// What each export layout holds along a tensor's axis (layout_refusal, plan_fit) and the budget
// planner restricted to it (BudgetPlanOptions::layout); ggml types refused off the rows.
#include <gtest/gtest.h>

#include <random>

#include "castscope/export.hpp"
#include "castscope/planner.hpp"
#include "test_seed.hpp"

using namespace castscope;

namespace {

Tensor normal(const Shape& s, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::F32, s);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = n(rng);
  return t;
}

const io::TensorInfo& info_of(const io::Model& m, const std::string& name) {
  for (const io::TensorInfo& t : m.tensors())
    if (t.name == name) return t;
  throw Error("no tensor " + name);
}

CastOptions auto_axis() {
  CastOptions c;
  c.device = Device::CPU;
  AxisSpec::parse("auto").apply(c);
  return c;
}

TEST(LayoutFit, EachLayoutSaysWhatItHolds) {
  const uint64_t seed = castscope::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed + 48);
  MemoryModel m;
  m.add("lin.weight", normal({64, 256}, rng));
  m.add("conv.weight", normal({32, 16, 3, 3}, rng));
  const io::TensorInfo& lin = info_of(m, "lin.weight");
  const io::TensorInfo& conv = info_of(m, "conv.weight");
  const CastOptions c = auto_axis();
  auto holds = [&](Layout l, const char* d, const io::TensorInfo& t) {
    return layout_refusal(l, DataType::parse(d), t, c);
  };
  EXPECT_EQ(holds(Layout::Native, "q4_k", lin), "");
  EXPECT_EQ(holds(Layout::Native, "q4_k", conv), "");  // rows of the view [O, I*kh*kw]
  EXPECT_EQ(holds(Layout::GGUF, "q4_k", lin), "");
  EXPECT_NE(holds(Layout::GGUF, "nvfp4", lin).find("gguf layout holds"), std::string::npos);
  EXPECT_EQ(holds(Layout::CompressedTensors, "nvfp4", lin), "");
  EXPECT_NE(holds(Layout::CompressedTensors, "nvfp4", conv).find("Linear and Embedding"),
            std::string::npos);
  EXPECT_NE(holds(Layout::CompressedTensors, "q4_k", lin).find("compressed-tensors layout holds"),
            std::string::npos);
  EXPECT_EQ(holds(Layout::GptOss, "mxfp4e2", lin), "");
  EXPECT_NE(holds(Layout::GptOss, "nvfp4", lin).find("MXFP4"), std::string::npos);

  // The planner solves within what the layout holds; the rest is listed with the reason.
  BudgetPlanOptions po;
  po.candidates = {"nvfp4", "q4_k", "mxfp8e4"};
  po.cast = c;
  po.layout = Layout::GGUF;
  const PlanTable t = build_plan_table(m, po);
  ASSERT_EQ(t.tensors.size(), 1u);  // the conv: GGUF holds none of them on its rows of 3
  EXPECT_EQ(t.tensors[0].name, "lin.weight");
  ASSERT_EQ(t.tensors[0].options.size(), 1u);
  EXPECT_EQ(t.candidates[static_cast<size_t>(t.tensors[0].options[0].candidate)], "q4_k");
  EXPECT_EQ(t.tensors[0].failed.size(), 2u);
  ASSERT_EQ(t.kept.size(), 1u);
  EXPECT_NE(t.kept[0].second.find("gguf layout"), std::string::npos) << t.kept[0].second;
  po.layout.reset();
  EXPECT_EQ(build_plan_table(m, po).tensors.size(), 2u);

  // A plan no layout holds (q4_k across the rows of a linear weight) names the tensor for each.
  const PlanFit none = plan_fit(
      m, parse_plan(R"({"default": "keep", "rules": [{"pattern": "lin.weight", "dtype": "q4_k",
                 "axis": "0"}]})"),
      c);
  EXPECT_TRUE(none.holds.empty());
  ASSERT_EQ(none.refused.size(), 4u);
  for (const auto& [layout, why] : none.refused) {
    ASSERT_EQ(why.size(), 1u) << to_string(layout);
    EXPECT_EQ(why[0].first, "lin.weight");
  }
  const PlanFit some =
      plan_fit(m, parse_plan(R"({"default": "keep", "rules": [{"pattern": "lin.weight",
                 "dtype": "nvfp4"}]})"),
               c);
  ASSERT_EQ(some.holds.size(), 2u);  // native and compressed-tensors
  EXPECT_EQ(some.holds[0], Layout::Native);
  EXPECT_EQ(some.holds[1], Layout::CompressedTensors);
}

TEST(LayoutFit, GgmlTypesAreRefusedOffTheRowsByName) {
  std::mt19937_64 rng(castscope::test::test_seed() + 4848);
  const Tensor x = normal({256, 64}, rng);
  CastOptions o;
  o.device = Device::CPU;
  o.axis = 0;  // a MatMul B [K, N] sums over K
  for (const char* d : {"q4_k", "q8_0", "iq4_nl"}) {
    try {
      cast(x, DataType::parse(d), o);
      ADD_FAILURE() << d << " was cast along axis 0";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(d), std::string::npos) << e.what();
    }
  }
  o.axis = -1;
  EXPECT_NO_THROW(cast(x, DataType::parse("q4_k"), o));
}

}  // namespace
