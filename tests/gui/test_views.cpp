// What the views show: histogram binning, exponent histograms, heatmap (tile map) data, mask
// images, metrics, and the composer's field <-> string round trip. Each test draws fresh random
// data from a recorded seed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "castscope/layout.hpp"
#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/composer.hpp"
#include "castscope/widgets/heatmap.hpp"
#include "test_seed.hpp"

using namespace castscope;
using namespace castscope::widgets;

namespace {

uint64_t fresh_seed() {
  return castscope::test::test_seed();
}

Tensor random_tensor(uint64_t seed, Shape shape, double outlier_rate = 0.01) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t(4.0f);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x = Tensor::empty(DType::F32, shape);
  float* p = x.mutable_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    p[i] = t(rng) * 0.1f;
    if (u(rng) < outlier_rate) p[i] *= 200.0f;
    if (u(rng) < 0.01f) p[i] = 0.0f;
  }
  return x;
}

}  // namespace

TEST(Views, ValueHistogramBinsEveryFiniteValueWhereItBelongs) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = random_tensor(seed, {64, 96});
  AnalysisOptions ao;
  ao.bins = 49;  // odd: zero (1% of the data) sits mid-bin, not on an edge
  auto a = analyze(x, DataType::parse("mxfp8e4"), {}, "t", ao);
  ASSERT_EQ(a->value_orig.counts.size(), 49u);
  // Recount independently from the bin edges the histogram reports.
  std::vector<uint64_t> expect(49, 0);
  const float* p = x.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t b =
        static_cast<int64_t>(std::floor((p[i] - a->value_orig.lo) / a->value_orig.bin_width()));
    expect[std::min<int64_t>(48, std::max<int64_t>(0, b))]++;
  }
  uint64_t total = 0;
  for (size_t b = 0; b < 49; ++b) {
    // A value within rounding of an edge may fall either side of it.
    EXPECT_NEAR(static_cast<double>(a->value_orig.counts[b]), static_cast<double>(expect[b]), 1.0)
        << "bin " << b;
    total += a->value_orig.counts[b];
  }
  EXPECT_EQ(total, static_cast<uint64_t>(x.numel()));
  uint64_t total_cast = 0;
  for (uint64_t c : a->value_cast.counts) total_cast += c;
  EXPECT_EQ(total_cast + a->value_cast.below + a->value_cast.above,
            static_cast<uint64_t>(x.numel()));
  EXPECT_EQ(a->value_orig.lo, -a->value_orig.hi);
  EXPECT_GE(a->value_orig.hi, a->absmax);
}

TEST(Views, ExponentHistogramsAreAlignedBinades) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = random_tensor(seed, {32, 128});
  auto a = analyze(x, DataType::parse("e2m1fnuz_e8m0_t32"), {}, "t");
  ASSERT_EQ(a->exp_orig.size(), a->exp_cast.size());
  ASSERT_EQ(static_cast<int>(a->exp_orig.size()), a->exp_hi - a->exp_lo + 1);
  std::vector<uint64_t> expect(a->exp_orig.size(), 0);
  uint64_t zeros = 0;
  const float* p = x.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (p[i] == 0) {
      ++zeros;
      continue;
    }
    const int e = static_cast<int>(std::floor(std::log2(std::fabs(static_cast<double>(p[i])))));
    ASSERT_GE(e, a->exp_lo);
    ASSERT_LE(e, a->exp_hi);
    expect[e - a->exp_lo]++;
  }
  EXPECT_EQ(a->exp_orig, expect);
  EXPECT_EQ(a->exp_zero_orig, zeros);
  // FP4 flushes small values of each tile to zero: the cast has at least as many zeros.
  EXPECT_GT(a->exp_zero_cast, zeros);
  // The shaded range spans the element format's dynamic range (log2(6 / 0.5)) and ends at the
  // tensor's absmax.
  EXPECT_NEAR(a->rep_hi - a->rep_lo, std::log2(6.0 / 0.5), 1e-9);
  EXPECT_NEAR(a->rep_hi, std::log2(a->absmax), 1e-9);
}

TEST(Views, RepresentableRangeOfUnscaledFormats) {
  auto [lo, hi] = representable_log2(NumberSpec::parse("e4m3fn"));
  EXPECT_DOUBLE_EQ(hi, std::log2(448.0));
  EXPECT_DOUBLE_EQ(lo, -9.0);
  auto [ilo, ihi] = representable_log2(NumberSpec::parse("int8"));
  EXPECT_DOUBLE_EQ(ilo, 0.0);
  EXPECT_DOUBLE_EQ(ihi, std::log2(127.0));
}

TEST(Views, HeatmapDataMatchesTilesRecomputed) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t R = 24, C = 160;
  const Tensor x = random_tensor(seed, {R, C}, 0.02);
  auto a = analyze(x, DataType::parse("mxfp4e2"), {}, "t");
  ASSERT_TRUE(a->tiles.has_value()) << a->tiles_note;
  const TileMap& m = *a->tiles;
  ASSERT_EQ(m.rows, R);
  ASSERT_EQ(m.cols, C / 32);
  ASSERT_EQ(m.tile_cols, 32);
  const float* p = x.ptr<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < m.cols; ++c) {
      float amax = 0;
      for (int64_t j = c * 32; j < (c + 1) * 32; ++j)
        amax = std::max(amax, std::fabs(p[r * C + j]));
      const size_t k = static_cast<size_t>(r * m.cols + c);
      EXPECT_EQ(m.absmax[k], amax) << "tile " << r << "," << c;
      // e8m0 scales are powers of two; with the floor rule the tile max lands below 2 * 6.
      const float s = m.scale_value[k];
      ASSERT_GT(s, 0);
      EXPECT_EQ(std::exp2(std::round(std::log2(s))), s);
      if (amax > 0) EXPECT_LT(amax / s, 12.0f);
      EXPECT_FLOAT_EQ(heat_value(m, HeatField::ScaleLog2, k), std::log2(s));
    }
  float lo, hi;
  heat_range(m, HeatField::Absmax, &lo, &hi);
  EXPECT_EQ(hi, static_cast<float>(a->absmax));
  EXPECT_LE(lo, hi);
}

TEST(Views, TileMapAbsentWithAReasonForUnscaledAndTensorScaled) {
  const Tensor x = random_tensor(fresh_seed(), {8, 64});
  for (const char* d : {"e4m3fn", "fp8e4_tensor", "tcfp8"}) {
    auto a = analyze(x, DataType::parse(d), {}, "t");
    EXPECT_FALSE(a->tiles.has_value()) << d;
    EXPECT_FALSE(a->tiles_note.empty()) << d;
  }
}

TEST(Views, MetricsMatchAnIndependentComputation) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = random_tensor(seed, {16, 256});
  auto a = analyze(x, DataType::parse("e2m1fnuz"), {}, "t");  // unscaled: large values clip
  const Tensor q = cast(x, DataType::parse("e2m1fnuz")).values;
  const float* p = x.ptr<float>();
  const float* qp = q.ptr<float>();
  double sx = 0, se = 0, emax = 0;
  int64_t clipped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = static_cast<double>(qp[i]) - p[i];
    sx += static_cast<double>(p[i]) * p[i];
    se += d * d;
    emax = std::max(emax, std::fabs(d));
    // Saturation starts where rounding would leave the format: half way to the next binade.
    clipped += std::fabs(p[i]) > NumberSpec::parse("e2m1fnuz").midmax();
  }
  EXPECT_NEAR(a->stats.snr_db, 10 * std::log10(sx / se), 1e-9);
  EXPECT_NEAR(a->stats.mse, se / x.numel(), 1e-12);
  EXPECT_EQ(a->stats.max_abs_err, emax);
  EXPECT_EQ(a->stats.clipped, clipped);
  EXPECT_GT(clipped, 0);
  EXPECT_EQ(a->bits_per_value, 4.0);
  // The error histogram holds every finite value.
  uint64_t n = 0;
  for (uint64_t c : a->error.counts) n += c;
  EXPECT_EQ(n, static_cast<uint64_t>(x.numel()));
}

TEST(Views, MaskImageCountsPerCell) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t R = 37, C = 301;
  std::vector<uint8_t> bits(R * C);
  for (auto& b : bits) b = rng() % 3 == 0;
  const MaskImage m = mask_image(bits.data(), Shape{R, C}, 16, "test");
  EXPECT_EQ(m.cell_rows, 3);
  EXPECT_EQ(m.cell_cols, 19);
  EXPECT_EQ(m.out_rows, 13);
  EXPECT_EQ(m.out_cols, 16);
  int64_t set = 0;
  for (auto b : bits) set += b;
  EXPECT_EQ(m.set, set);
  for (int64_t r = 0; r < m.out_rows; ++r)
    for (int64_t c = 0; c < m.out_cols; ++c) {
      int64_t hits = 0, n = 0;
      for (int64_t i = r * 3; i < std::min(R, r * 3 + 3); ++i)
        for (int64_t j = c * 19; j < std::min(C, c * 19 + 19); ++j) hits += bits[i * C + j], ++n;
      EXPECT_FLOAT_EQ(m.fraction[r * m.out_cols + c], static_cast<float>(hits) / n);
    }
}

TEST(Views, SparsityMaskKeepsNOfEveryM) {
  const Tensor x = random_tensor(fresh_seed(), {16, 64}, 0.0);
  auto a = analyze(x, DataType::parse("e4m3fn_e8m0_t32n2m4"), {}, "t");
  EXPECT_NE(a->mask.what.find("2:4"), std::string::npos) << a->mask.what;
  EXPECT_EQ(a->mask.set, x.numel() / 2);
  EXPECT_EQ(a->mask.total, x.numel());
}

TEST(Views, BadInputsAreErrors) {
  EXPECT_THROW(analyze(Tensor::empty(DType::F32, {0, 4}), DataType::parse("mxfp4e2"), {}, "t"),
               Error);
  EXPECT_THROW(analyze(Tensor::empty(DType::I32, {4, 4}), DataType::parse("mxfp4e2"), {}, "t"),
               Error);
  // A tile wider than the tensor's last axis is one partial tile per row, not an error.
  EXPECT_NO_THROW(analyze(random_tensor(1, {4, 8}), DataType::parse("mxfp4e2"), {}, "t"));
  JobControl job;
  job.cancel = true;
  EXPECT_THROW(analyze(random_tensor(2, {64, 64}), DataType::parse("mxfp4e2"), {}, "t", {}, &job),
               Cancelled);
}

TEST(Composer, FieldsRoundTripEveryStandardRegistryDatatype) {
  int checked = 0;
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    if (d.family() != Family::Standard) continue;
    ComposerState s;
    s.set(d);
    int nscale = 0, nsecond = 0;
    scale_formats(&nscale);
    second_formats(&nsecond);
    // Scale formats outside the composer's list cannot round trip through the fields.
    if (d.scaled() && s.scale_fmt >= 0 &&
        std::string(scale_formats(&nscale)[s.scale_fmt]) != d.scale()->scale.name())
      continue;
    EXPECT_EQ(DataType::parse(s.fields_string()), d) << e.name << " -> " << s.fields_string();
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(Composer, InvalidStringKeepsTheLastDatatypeAndExplains) {
  ComposerState s;
  ASSERT_TRUE(s.set_text("nvfp4"));
  const DataType before = s.dtype;
  EXPECT_FALSE(s.set_text("e4m3fn_e8m0_t32n2m3"));
  EXPECT_NE(s.error.find("sparsity"), std::string::npos) << s.error;
  EXPECT_EQ(s.dtype, before);
  s.kind = 0;
  s.ebits = 4;
  s.mbits = 3;
  s.infnan = static_cast<int>(InfNan::FN);
  s.scaling = 3;
  s.scale_fmt = 0;
  s.second_fmt = 0;
  s.tile = 32;
  s.sub = 0;
  s.sp_n = 0;
  s.sp_m = 0;
  EXPECT_EQ(DataType::parse(s.fields_string()), DataType::parse("mxfp8e4"));
}

TEST(Views, ValuesBlockIsTheSliceOfTheCastValuesAndComparisonsKeepNone) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = random_tensor(seed, {3, 20, 70});
  auto a = analyze(x, DataType::parse("mxfp4e2"), {}, "t");
  ASSERT_TRUE(a->values);
  const Tensor all = values_block(*a, 0, 0, 60, 70);
  ASSERT_EQ(all.shape(), (Shape{60, 70}));
  // A block that runs past the last row and column is clipped to the values.
  const Tensor b = values_block(*a, 57, 40, 10, 64);
  ASSERT_EQ(b.shape(), (Shape{3, 30}));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 30; ++c)
      ASSERT_EQ(b.ptr<float>()[r * 30 + c], all.ptr<float>()[(57 + r) * 70 + 40 + c])
          << r << "," << c;
  EXPECT_THROW(values_block(*a, 60, 0, 1, 1), Error);
  EXPECT_THROW(values_block(*a, 0, -1, 1, 1), Error);

  AnalysisOptions lean;
  lean.keep_values = false;
  auto c = analyze(x, DataType::parse("mxfp4e2"), {}, "t", lean);
  EXPECT_FALSE(c->input);
  EXPECT_FALSE(c->values);
  EXPECT_EQ(c->stats.count, a->stats.count);
  EXPECT_EQ(c->value_cast.counts, a->value_cast.counts);
  EXPECT_THROW(values_block(*c, 0, 0, 1, 1), Error);
}

namespace {

// The mask, values and tile map of an analysis checked against its view [outputs, reduction]
// recomputed by hand: element (r, c) of the view at storage index `at(r, c)`.
template <class At>
void expect_views_on(const Analysis& a, int64_t rows, int64_t cols, At at) {
  ASSERT_EQ(a.view.rows, rows);
  ASSERT_EQ(a.view.cols, cols);
  for (int64_t r = 0; r < rows; r += 7)
    for (int64_t c = 0; c < cols; c += 3) ASSERT_EQ(a.view.at(r, c), at(r, c)) << r << "," << c;
  // The mask: every non-zero input cast to zero, counted per cell of the view.
  const MaskImage& m = a.mask;
  ASSERT_EQ(m.rows, rows);
  ASSERT_EQ(m.cols, cols);
  const float* x = a.input.ptr<float>();
  const float* q = a.values.host().ptr<float>();
  std::vector<int64_t> hits(static_cast<size_t>(m.out_rows * m.out_cols), 0);
  int64_t set = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = at(r, c);
      const bool on = std::isfinite(x[i]) && x[i] != 0 && q[i] == 0;
      hits[static_cast<size_t>((r / m.cell_rows) * m.out_cols + c / m.cell_cols)] += on;
      set += on;
    }
  ASSERT_GT(set, 0) << "the test data must put some values in the mask";
  EXPECT_EQ(m.set, set);
  for (size_t k = 0; k < hits.size(); ++k) {
    const int64_t i = static_cast<int64_t>(k) / m.out_cols,
                  j = static_cast<int64_t>(k) % m.out_cols;
    const int64_t n = (std::min(rows, (i + 1) * m.cell_rows) - i * m.cell_rows) *
                      (std::min(cols, (j + 1) * m.cell_cols) - j * m.cell_cols);
    EXPECT_FLOAT_EQ(m.fraction[k], static_cast<float>(hits[k]) / static_cast<float>(n)) << k;
  }
  // The tile map lies on the same view, and so does every tile's block of values.
  ASSERT_TRUE(a.tiles);
  const TileMap& t = *a.tiles;
  EXPECT_EQ(t.rows * t.tile_rows, rows);
  EXPECT_EQ(t.cols, (cols + t.tile_cols - 1) / t.tile_cols);
  EXPECT_EQ(a.tile_clipped.size(), t.scale_value.size()) << a.tile_clipped_note;
  for (int64_t k : {int64_t{0}, t.cols - 1, t.rows * t.cols - 1}) {
    const int64_t r0 = (k / t.cols) * t.tile_rows, c0 = (k % t.cols) * t.tile_cols;
    const Tensor b = values_block(a, r0, c0, t.tile_rows, t.tile_cols);
    ASSERT_EQ(b.shape()[1], std::min(t.tile_cols, cols - c0)) << "tile " << k;
    double amax = 0;
    for (int64_t c = 0; c < b.shape()[1]; ++c) {
      ASSERT_EQ(b.ptr<float>()[c], q[at(r0, c0 + c)]) << "tile " << k << " col " << c;
      amax = std::max(amax, std::fabs(static_cast<double>(x[at(r0, c0 + c)])));
    }
    EXPECT_EQ(t.absmax[static_cast<size_t>(k)], static_cast<float>(amax)) << "tile " << k;
  }
}

}  // namespace

TEST(Views, MaskTilesAndValuesOfAConvWeightLieOnItsFlattenedView) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // A conv weight [O, I, kh, kw] under its layout, as the app casts a file's tensor: reduced
  // over I*kh*kw (view [16, 54]).
  const Tensor x = random_tensor(seed, {16, 6, 3, 3}, 0.05);
  CastOptions automatic;
  automatic.axis_auto = true;
  const CastOptions o = options_for(automatic, x.shape(), default_layout(x.shape()));
  AnalysisOptions ao;
  ao.device = false;
  ao.mask_max_side = 8;  // cells of several elements in both directions
  auto a = analyze(x, DataType::parse("mxfp4e2"), o, "conv", ao);
  expect_views_on(*a, 16, 54, [](int64_t r, int64_t c) { return r * 54 + c; });
  EXPECT_THROW(values_block(*a, 0, 54, 1, 1), Error);
}

TEST(Views, MaskTilesAndValuesOfAMatMulWeightKNLieOnItsTransposedView) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // An ONNX MatMul B stored [K, N] = [40, 70], reduced over K (axis 0): the view [N, K] = [70,
  // 40] is the storage's transpose.
  const Tensor x = random_tensor(seed, {40, 70}, 0.05);
  CastOptions o;
  AxisSpec::parse("0").apply(o);
  for (int max_side : {256, 9}) {
    AnalysisOptions ao;
    ao.device = false;
    ao.mask_max_side = max_side;
    auto a = analyze(x, DataType::parse("mxfp4e2"), o, "matmul_b", ao);
    expect_views_on(*a, 70, 40, [](int64_t r, int64_t c) { return c * 70 + r; });
  }
  // And a rank-3 tensor reduced over its middle axis: neither the storage order nor its
  // transpose ([2, 40, 35] -> view [70, 40]).
  const Tensor y = random_tensor(seed + 1, {2, 40, 35}, 0.05);
  AxisSpec::parse("1").apply(o);
  AnalysisOptions ao;
  ao.device = false;
  ao.mask_max_side = 16;
  auto b = analyze(y, DataType::parse("mxfp4e2"), o, "middle", ao);
  expect_views_on(*b, 70, 40,
                  [](int64_t r, int64_t c) { return ((r / 35) * 40 + c) * 35 + r % 35; });
}
