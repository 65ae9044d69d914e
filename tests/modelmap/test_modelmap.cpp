// The model map sweep and the linear-layer output error: cells equal direct casts, rows and
// groups come from names, totals and plans follow the choices, and rotation / outlier effects
// show where they should.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "castscope/linear_error.hpp"
#include "castscope/modelmap.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

constexpr uint64_t kSeed = 1723;

using test::normal;

MemoryModel small_model() {
  MemoryModel m("small");
  m.add("model.embed_tokens.weight", normal({64, 128}, kSeed));
  m.add("model.layers.0.self_attn.q_proj.weight", normal({128, 128}, kSeed + 1, 0.02));
  m.add("model.layers.0.mlp.up_proj.weight", normal({256, 128}, kSeed + 2, 0.05));
  m.add("model.layers.0.input_layernorm.weight", normal({128}, kSeed + 3));
  m.add("model.layers.1.mlp.down_proj.weight", normal({128, 256}, kSeed + 4, 3.0));
  m.add("lm_head.weight", normal({64, 128}, kSeed + 5));
  return m;
}

TEST(ModelMap, CellsAreTheDirectCastsAndRowsFollowNames) {
  const MemoryModel m = small_model();
  MapOptions o;
  o.dtypes = {"mxfp4e2", "nvfp4", "e4m3fn"};
  o.cast.device = Device::CPU;
  int streamed = 0;
  const ModelMap map = sweep_model(m, o, nullptr, [&](const MapRow&) { ++streamed; });
  ASSERT_EQ(map.rows.size(), 4u);  // no embedding, no 1-D norm
  EXPECT_EQ(streamed, 4);
  EXPECT_EQ(map.rows[0].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(map.rows[0].group, "model.layers.0");
  EXPECT_EQ(map.rows[0].block, "self_attn");
  EXPECT_EQ(map.rows[2].block, "mlp");
  EXPECT_EQ(map.rows[3].name, "lm_head.weight");
  EXPECT_EQ(map.rows[3].group, "");
  for (const MapRow& r : map.rows) {
    const Tensor x = m.load(r.name);
    ASSERT_EQ(r.cells.size(), 3u);
    for (size_t d = 0; d < 3; ++d) {
      CastOptions co;
      co.device = Device::CPU;
      const CastResult c = cast(x, DataType::parse(o.dtypes[d]), co);
      const Stats s = compute_stats(x, c.values, c.counts.clipped);
      EXPECT_EQ(r.cells[d].stats.snr_db, s.snr_db) << r.name << " " << o.dtypes[d];
      EXPECT_EQ(r.cells[d].stats.max_abs_err, s.max_abs_err);
      EXPECT_EQ(metric_value(r.cells[d].stats, MapMetric::RelErr),
                std::sqrt(s.mse / s.signal_power));
      EXPECT_EQ(metric_value(r.cells[d].stats, MapMetric::Clipped), s.clipped_pct());
    }
  }
  // Gaussian rows: FP4 loses more than FP8 on every tensor.
  for (const MapRow& r : map.rows) EXPECT_LT(r.cells[0].stats.snr_db, r.cells[2].stats.snr_db);
  EXPECT_EQ(map.values, 128 * 128 + 256 * 128 + 128 * 256 + 64 * 128);

  o.include_embeddings = true;
  o.include_1d = true;
  EXPECT_EQ(sweep_model(m, o).rows.size(), 6u);
  o.filter = "mlp";
  EXPECT_EQ(sweep_model(m, o).rows.size(), 2u);
}

TEST(ModelMap, CancelAndBadInput) {
  const MemoryModel m = small_model();
  MapOptions o;
  o.dtypes = {"mxfp4e2"};
  JobControl job;
  job.cancel = true;
  EXPECT_THROW(sweep_model(m, o, &job), Cancelled);
  double last = 0;
  JobControl prog;
  prog.on_progress = [&](double f) {
    EXPECT_GE(f + 1e-12, last);
    last = f;
  };
  sweep_model(m, o, &prog);
  EXPECT_DOUBLE_EQ(last, 1.0);
  o.dtypes = {"notatype"};
  EXPECT_THROW(sweep_model(m, o), Error);
  o.dtypes = {"mxfp4e2"};
  o.filter = "(";
  EXPECT_THROW(sweep_model(m, o), Error);
  // A rotation that does not divide an axis fails that cell, not the sweep.
  o.filter = "";
  o.cast.rotate = {256, false, 0};
  const ModelMap map = sweep_model(m, o);
  EXPECT_FALSE(map.rows[0].cells[0].error.empty());  // 128 columns
  EXPECT_TRUE(map.rows[2].cells[0].error.empty());   // 256 columns
  EXPECT_THROW(parse_map_metric("psnr"), Error);
  EXPECT_EQ(parse_map_metric("outsnr"), MapMetric::OutputSNR);
  EXPECT_TRUE(std::isnan(cell_value(map.rows[0].cells[0], MapMetric::SNR)));  // failed cell
}

TEST(ModelMap, TotalsAndPlanFollowTheChoice) {
  const MemoryModel m = small_model();
  MapOptions o;
  o.dtypes = {"mxfp4e2", "mxfp8e4"};
  const ModelMap map = sweep_model(m, o);
  std::vector<int> choice = {0, 1, -1, 0};
  const MapTotals t = map_totals(map, choice);
  const double expect = 4.25 * 128 * 128 + 8.25 * 256 * 128 + 32.0 * 128 * 256 + 4.25 * 64 * 128;
  EXPECT_DOUBLE_EQ(t.bits, expect);
  EXPECT_DOUBLE_EQ(t.stored_bits, 32.0 * map.values);
  EXPECT_DOUBLE_EQ(t.avg_bits(), expect / map.values);
  const ExportPlan p = plan_from_map(map, choice, {64, true, 2});
  ASSERT_EQ(p.rules.size(), 3u);
  for (size_t i = 0; i < map.rows.size(); ++i) {
    const io::TensorInfo info{map.rows[i].name, "F32", map.rows[i].shape};
    const auto d = p.dtype_for(info);
    if (choice[i] < 0) {
      EXPECT_FALSE(d);
      EXPECT_FALSE(p.rotation_for(info).enabled());
    } else {
      ASSERT_TRUE(d);
      EXPECT_EQ(*d, map.dtypes[static_cast<size_t>(choice[i])]);
      EXPECT_EQ(p.rotation_for(info), (Rotation{64, true, 2}));
    }
  }
  // The rules match only their own tensor (names contain regex metacharacters).
  EXPECT_FALSE(p.dtype_for({"model_layers_0_self_attn_q_proj_weight", "F32", {1, 1}}));
  const ExportPlan back = parse_plan(plan_to_json(p));
  EXPECT_EQ(back.dtype_for({map.rows[1].name, "F32", map.rows[1].shape}), map.dtypes[1]);
}

// Output error checked against a plain double product of the same cast operands.
TEST(LinearError, MatchesAnIndependentProduct) {
  const Tensor x = synthetic_activations(16, 256, 4, 30.0, kSeed);
  const Tensor w = normal({48, 256}, kSeed + 20, 0.05);
  LinearErrorOptions o;
  o.act_dtype = DataType::parse("mxfp8e4");
  o.weight_dtype = DataType::parse("nvfp4");
  o.cast.device = Device::CPU;
  const LinearError e = linear_error(x, w, o);
  EXPECT_EQ(e.tokens, 16);
  EXPECT_EQ(e.out, 48);
  ASSERT_EQ(e.channel_rel_err.size(), 48u);
  const Tensor xq = cast(x, *o.act_dtype, o.cast).values;
  const Tensor wq = cast(w, *o.weight_dtype, o.cast).values;
  double sig = 0, err = 0;
  std::vector<double> cs(48), ce(48);
  for (int t = 0; t < 16; ++t)
    for (int c = 0; c < 48; ++c) {
      double y = 0, yq = 0;
      for (int k = 0; k < 256; ++k) {
        y += double(x.ptr<float>()[t * 256 + k]) * w.ptr<float>()[c * 256 + k];
        yq += double(xq.ptr<float>()[t * 256 + k]) * wq.ptr<float>()[c * 256 + k];
      }
      sig += y * y;
      err += (yq - y) * (yq - y);
      cs[c] += y * y;
      ce[c] += (yq - y) * (yq - y);
    }
  // float32 sums against double sums: their difference is ~1e-7 of |y|, far below the cast
  // error (SNR ~20-30 dB), so 0.01 dB covers it.
  EXPECT_NEAR(e.snr_db, 10 * std::log10(sig / err), 0.01);
  for (int c = 0; c < 48; ++c)
    EXPECT_NEAR(e.channel_rel_err[c], std::sqrt(ce[c] / cs[c]), 1e-3 * std::sqrt(ce[c] / cs[c]));
  uint64_t n = e.error_hist.below + e.error_hist.above;
  for (uint64_t k : e.error_hist.counts) n += k;
  EXPECT_EQ(n, 16u * 48u);
  // Uncast operands: no error at all.
  const LinearError exact = linear_error(x, w, LinearErrorOptions{});
  EXPECT_TRUE(std::isinf(exact.snr_db));
  EXPECT_EQ(exact.rel_err, 0.0);
}

// A weight stored [in, out] (an ONNX MatMul's B, GPT-2's Conv1D) reduced over axis 0, or a conv
// [O, I, kh, kw] over its flattened axes 1..3, gives the error of its [out, in] matrix.
TEST(LinearError, WeightReadAlongItsLayout) {
  const Tensor x = synthetic_activations(8, 96, 3, 20.0, kSeed + 40);
  const Tensor w = normal({40, 96}, kSeed + 41, 0.05);
  Tensor wt = Tensor::empty(DType::F32, {96, 40});
  for (int r = 0; r < 40; ++r)
    for (int k = 0; k < 96; ++k) wt.mutable_ptr<float>()[k * 40 + r] = w.ptr<float>()[r * 96 + k];
  LinearErrorOptions o;
  o.weight_dtype = DataType::parse("mxfp4e2");
  o.cast.device = Device::CPU;
  const LinearError ref = linear_error(x, w, o);
  o.weight_axis = AxisSpec::parse("0");
  const LinearError lead = linear_error(x, wt, o);
  EXPECT_EQ(lead.out, 40);
  EXPECT_EQ(lead.in, 96);
  EXPECT_EQ(lead.snr_db, ref.snr_db);
  EXPECT_EQ(lead.channel_rel_err, ref.channel_rel_err);
  // Read as [out, in] (the default) the same [96, 40] does not fit 96 features.
  o.weight_axis = AxisSpec::parse("-1");
  EXPECT_THROW(linear_error(x, wt, o), Error);
  o.weight_axis = AxisSpec::parse("1:");
  const LinearError conv = linear_error(x, w.reshaped({40, 6, 4, 4}), o);
  EXPECT_EQ(conv.snr_db, ref.snr_db);
  o.weight_axis = AxisSpec::parse("1");
  EXPECT_THROW(linear_error(x, w.reshaped({40, 6, 4, 4}), o), Error);
}

TEST(LinearError, RotationRecoversOutlierChannelsInPerTokenInt4) {
  // QuaRot's setting: INT4 with one scale per token. A few outlier channels set every token's
  // scale, so the other channels round to zero; a random Hadamard rotation spreads the outliers
  // over each block and the output SNR rises.
  const Tensor x = synthetic_activations(32, 512, 4, 20.0, kSeed + 30);
  const Tensor w = normal({64, 512}, kSeed + 31, 0.05);
  LinearErrorOptions o;
  o.act_dtype = DataType::parse("int4_float32_t0");
  o.weight_dtype = DataType::parse("int8_float32_t0");
  const double plain = linear_error(x, w, o).snr_db;
  o.cast.rotate = {128, true, 5};
  const double rotated = linear_error(x, w, o).snr_db;
  EXPECT_GT(rotated, plain + 3.0) << plain << " dB vs " << rotated << " dB";
}

TEST(LinearError, BadShapesAndActivationFiles) {
  const Tensor x = normal({4, 64}, kSeed);
  try {
    linear_error(x, normal({8, 32}, kSeed), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("have 64 features, the weight [8, 32] expects 32"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(synthetic_activations(4, 8, 9, 10, 1), Error);
  EXPECT_THROW(load_activations("/nonexistent/acts.npy"), Error);
  const Tensor a = synthetic_activations(8, 64, 2, 10, 3),
               b = synthetic_activations(8, 64, 2, 10, 3);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  // Outlier channels: 2 of 64 columns have a far larger spread.
  int big = 0;
  for (int c = 0; c < 64; ++c) {
    double s = 0;
    for (int t = 0; t < 8; ++t) s += std::fabs(a.ptr<float>()[t * 64 + c]);
    big += s / 8 > 4.0;
  }
  EXPECT_EQ(big, 2);
}

TEST(LinearError, ActivationFilesReadBackExactly) {
  const Tensor a = synthetic_activations(6, 64, 3, 15, kSeed + 50);
  const std::string npy = ::testing::TempDir() + "castscope_acts.npy";
  const std::string st = ::testing::TempDir() + "castscope_acts.safetensors";
  io::save_npy(npy, a);
  save_safetensors(st, {{"norm.weight", normal({64}, kSeed)}, {"acts", a}, {"other", a}}, {});
  for (const Tensor& b : {load_activations(npy), load_activations(st, "acts")}) {
    ASSERT_EQ(b.shape(), a.shape());
    EXPECT_EQ(std::memcmp(b.data(), a.data(), a.nbytes()), 0);
  }
  try {
    load_activations(st, "missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named 'missing'"), std::string::npos);
  }
  std::remove(npy.c_str());
  std::remove(st.c_str());
}

TEST(ModelMap, ActivationsAddOutputSnrToFittingRows) {
  const MemoryModel m = small_model();
  MapOptions o;
  o.dtypes = {"nvfp4", "mxfp8e4"};
  o.activations = synthetic_activations(8, 128, 4, 20.0, kSeed + 40);
  const ModelMap map = sweep_model(m, o);
  for (const MapRow& r : map.rows) {
    const bool fits = r.shape[1] == 128;
    for (const MapCell& c : r.cells) {
      EXPECT_EQ(c.has_output, fits) << r.name;
      if (fits) EXPECT_TRUE(std::isfinite(c.out_snr_db));
      if (fits)
        EXPECT_EQ(cell_value(c, MapMetric::OutputSNR), c.out_snr_db);
      else
        EXPECT_TRUE(std::isnan(cell_value(c, MapMetric::OutputSNR)));
      EXPECT_EQ(cell_value(c, MapMetric::SNR), c.stats.snr_db);
    }
    if (fits) EXPECT_LT(r.cells[0].out_snr_db, r.cells[1].out_snr_db) << r.name;
  }
}

// Calls that share their operands through a LinearReuse give what calls without it give, also
// when the weight or the activations change between them.
TEST(ModelMap, LinearReuseGivesTheResultsOfSeparateCalls) {
  const uint64_t seed = kSeed + 60;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = synthetic_activations(12, 64, 3, 15.0, seed);
  const Tensor x2 = synthetic_activations(12, 64, 3, 15.0, seed + 1);
  const Tensor w = normal({24, 64}, seed + 2);
  const Tensor w2 = normal({64, 24}, seed + 3);  // [in, out]: reduced over axis 0
  LinearReuse reuse;
  struct Call {
    const Tensor *x, *w;
    const char* dtype;
    const char* axis;
  } calls[] = {{&x, &w, "nvfp4", ""},
               {&x, &w, "mxfp8e4", ""},
               {&x, &w2, "mxfp4e2", "0"},
               {&x2, &w2, "mxfp4e2", "0"},
               {&x2, &w, "nvfp4", ""}};
  for (const Call& c : calls) {
    LinearErrorOptions lo;
    lo.cast.device = Device::CPU;
    lo.weight_dtype = DataType::parse(c.dtype);
    lo.act_dtype = lo.weight_dtype;
    if (*c.axis) lo.weight_axis = AxisSpec::parse(c.axis);
    lo.keep_outputs = true;
    const LinearError shared = linear_error(*c.x, *c.w, lo, nullptr, &reuse);
    const LinearError alone = linear_error(*c.x, *c.w, lo);
    EXPECT_EQ(shared.snr_db, alone.snr_db) << c.dtype << " axis '" << c.axis << "'";
    EXPECT_EQ(shared.out, alone.out);
    ASSERT_EQ(shared.yq.numel(), alone.yq.numel());
    EXPECT_EQ(std::memcmp(shared.yq.data(), alone.yq.data(), alone.yq.nbytes()), 0) << c.dtype;
    EXPECT_EQ(std::memcmp(shared.y.data(), alone.y.data(), alone.y.nbytes()), 0) << c.dtype;
  }
  EXPECT_EQ(reuse.uploads(), 0u);  // the CPU copies nothing to a device
}

}  // namespace
}  // namespace castscope
