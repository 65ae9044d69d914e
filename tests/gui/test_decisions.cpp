// The computations behind the comparison and planning panels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/export.hpp"
#include "castscope/widgets/decisions.hpp"
#include "test_seed.hpp"

using namespace castscope;
using namespace castscope::widgets;

namespace {

uint64_t fresh_seed() {
  return castscope::test::test_seed();
}

Tensor gaussian(uint64_t seed, Shape shape) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Tensor x = Tensor::empty(DType::F32, shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_ptr<float>()[i] = n(rng);
  return x;
}

}  // namespace

TEST(Decisions, ParetoFrontMatchesBruteForce) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> bits(2, 16), snr(0, 40);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<TradeoffPoint> pts(12);
    for (auto& p : pts) p = {static_cast<double>(bits(rng)) / 2, static_cast<double>(snr(rng))};
    const auto front = pareto_front(pts);
    for (size_t i = 0; i < pts.size(); ++i) {
      bool dominated = false;
      for (size_t j = 0; j < pts.size(); ++j)
        if (pts[j].bits <= pts[i].bits && pts[j].snr_db >= pts[i].snr_db &&
            (pts[j].bits < pts[i].bits || pts[j].snr_db > pts[i].snr_db))
          dominated = true;
      const bool on = std::find(front.begin(), front.end(), i) != front.end();
      if (dominated) EXPECT_FALSE(on) << "point " << i;
      // A non-dominated point is on the front unless an identical earlier point stands for it.
      bool dup_before = false;
      for (size_t j = 0; j < i; ++j)
        dup_before |= pts[j].bits == pts[i].bits && pts[j].snr_db == pts[i].snr_db;
      if (!dominated && !dup_before) EXPECT_TRUE(on) << "point " << i;
    }
    for (size_t k = 1; k < front.size(); ++k) {
      EXPECT_LT(pts[front[k - 1]].bits, pts[front[k]].bits);
      EXPECT_LT(pts[front[k - 1]].snr_db, pts[front[k]].snr_db);
    }
  }
}

TEST(Decisions, ScaleModesDifferOnlyWhereScalesDo) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = gaussian(seed, {16, 128});
  const auto runs = compare_scale_modes(x, DataType::parse("mxfp4e2"), {}, "t");
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[0].mode, ScaleMode::Floor);
  EXPECT_EQ(runs[0].tiles_differ, 0);
  for (const auto& r : runs) {
    ASSERT_TRUE(r.analysis->tiles);
    EXPECT_EQ(r.analysis->options.scale_mode, r.mode);
    int64_t n = 0;
    for (size_t k = 0; k < r.differs.size(); ++k) {
      const bool d = r.analysis->tiles->scale_code[k] != runs[0].analysis->tiles->scale_code[k];
      EXPECT_EQ(r.differs[k] != 0, d);
      n += d;
    }
    EXPECT_EQ(n, r.tiles_differ);
  }
  // Ceil never picks a smaller scale than floor, and on Gaussian data it picks a larger one for
  // most tiles.
  EXPECT_GT(runs[1].tiles_differ, 0);
}

TEST(Decisions, CheapestMeetingIsCheapestAndMeets) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = gaussian(seed, {8, 256});
  const auto cands = registry_candidates(256);
  for (size_t i = 1; i < cands.size(); ++i) EXPECT_LE(cands[i - 1].bits, cands[i].bits);
  for (double target : {10.0, 25.0, 40.0}) {
    const AutoPick p = cheapest_meeting(x, target, cands, {});
    ASSERT_TRUE(p.met) << target;
    EXPECT_GE(p.snr_db, target);
    // No cheaper candidate reaches the target.
    for (const Candidate& c : cands) {
      if (c.bits >= p.bits) break;
      CastResult r;
      try {
        r = cast(x, c.dtype);
      } catch (const Error&) {
        continue;
      }
      EXPECT_LT(compute_stats(x, r.values).snr_db, target)
          << c.name << " is cheaper than " << p.dtype;
    }
  }
  // float32 in the registry is exact, so only lossy candidates can miss a target.
  std::vector<Candidate> lossy;
  for (const Candidate& c : cands)
    if (c.bits <= 8) lossy.push_back(c);
  const AutoPick never = cheapest_meeting(x, 1e9, lossy, {});
  EXPECT_FALSE(never.met);
  EXPECT_FALSE(never.dtype.empty());
  EXPECT_TRUE(std::isfinite(never.snr_db));
}

TEST(Decisions, GlobEscapeMatchesOnlyTheName) {
  for (const std::string name : {"layers.0.mlp.weight", "a*b", "x[1]?", "plain"}) {
    const std::string pat = glob_escape(name);
    EXPECT_TRUE(glob_match(pat, name)) << pat;
    EXPECT_FALSE(glob_match(pat, name + "x")) << pat;
  }
  EXPECT_FALSE(glob_match(glob_escape("a*b"), "aXXb"));
}

TEST(Decisions, MetricsExportsCarryTheNumbers) {
  const Tensor x = gaussian(fresh_seed(), {4, 64});
  auto a = analyze(x, DataType::parse("nvfp4"), {}, "w");
  auto b = analyze(x, DataType::parse("float32"), {}, "w");  // exact: SNR infinite
  const std::string csv = metrics_csv({a.get(), b.get()});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("e2m1fnuz_e4m3fn_float32_t16"), std::string::npos);
  const auto j = nlohmann::json::parse(metrics_json({a.get(), b.get()}));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_NEAR(j[0]["snr_db"].get<double>(), a->stats.snr_db, 1e-9);
  // The storage on this tensor, not the nominal 4.5: 256 e2m1 codes, 16 e4m3 scales and one
  // float32 tensor scale over 256 values.
  EXPECT_EQ(j[0]["bits_per_value"].get<double>(), (256 * 4 + 16 * 8 + 32) / 256.0);
  EXPECT_EQ(a->nominal_bits, 4.5);
  EXPECT_EQ(a->row_length, 64);
  EXPECT_TRUE(j[1]["snr_db"].is_null());
  EXPECT_TRUE(j[1]["exact"].get<bool>());
}

TEST(Decisions, PlanRulesRoundTripThroughTheCliJson) {
  // The plan panel edits rules and saves them with the exporter's plan_to_json; the CLI must
  // read the same datatypes back.
  ExportPlan p;
  PlanRule r;
  r.pattern = glob_escape("demo/layer");
  r.dtype = "nvfp4";
  r.target = DataType::parse("nvfp4");
  p.rules.push_back(r);
  const ExportPlan q = parse_plan(plan_to_json(p), "test");
  ASSERT_EQ(q.rules.size(), 1u);
  io::TensorInfo info;
  info.name = "demo/layer";
  info.dtype = "float32";
  info.shape = {4, 64};
  ASSERT_TRUE(q.dtype_for(info).has_value());
  EXPECT_EQ(*q.dtype_for(info), DataType::parse("nvfp4"));
  info.name = "demo/layer2";
  EXPECT_FALSE(q.dtype_for(info).has_value());
}

TEST(Decisions, ExportWithAPlanRoundTrips) {
  // What the export dialog does: the open model, the panel's plan, export_model; the written file
  // must give back exactly the values the views showed for the planned datatype.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  MemoryModel m("mem");
  const Tensor w = gaussian(seed, {16, 64}), b = gaussian(seed + 1, {8, 32});
  m.add("layer.weight", w);
  m.add("layer.other", b);
  const ExportPlan plan = parse_plan(
      R"({"default": "keep", "rules": [{"pattern": "layer.weight", "dtype": "mxfp4e2"}]})", "test");
  const std::string out =
      ::testing::TempDir() + "castscope_gui_export_" + std::to_string(seed) + ".safetensors";
  JobControl job;
  const ExportReport r = export_model(m, out, plan, ExportOptions{}, &job);
  EXPECT_EQ(r.tensors.size(), 2u);
  EXPECT_GT(r.bytes_out, 0u);
  EXPECT_LT(r.bytes_out, r.bytes_in);
  EXPECT_NEAR(job.progress.load(), 1.0, 1e-9);
  bool found = false;
  for (const io::PackedTensor& t : io::load_packed(out)) {
    if (t.name != "layer.weight") continue;
    found = true;
    const Tensor back = upcast(t.result);
    const auto a = analyze(w, DataType::parse("mxfp4e2"), {}, "layer.weight");
    ASSERT_EQ(back.numel(), w.numel());
    EXPECT_EQ(std::memcmp(back.data(), a->values.to_host().data(), back.nbytes()), 0);
  }
  EXPECT_TRUE(found);
  std::remove(out.c_str());
}
