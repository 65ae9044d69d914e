// The host path of the views (widgets::analyze with the device off) computes every view in two
// fused passes over the input and its cast; each view must equal what the engine's reference
// functions (compute_stats, histogram, exponent_histogram, error_histogram, the mask count)
// give for the same data: counts exactly, sums up to summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "castscope/metrics.hpp"
#include "castscope/widgets/analysis.hpp"
#include "backends/cpu/cast_cpu.hpp"
#include "test_seed.hpp"

namespace castscope {
namespace {

using widgets::Analysis;
using widgets::AnalysisOptions;

// N(0, 1) times 2^U(-12, 12), with NaN, +-Inf, +-0, subnormals and exact powers of two mixed in.
Tensor hard_input(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(DType::F32, shape);
  float* p = t.mutable_ptr<float>();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> ex(-12, 12), pick(0, 199);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = std::ldexp(nd(rng), ex(rng));
    switch (pick(rng)) {
      case 0:
        v = std::numeric_limits<float>::quiet_NaN();
        break;
      case 1:
        v = std::numeric_limits<float>::infinity();
        break;
      case 2:
        v = -std::numeric_limits<float>::infinity();
        break;
      case 3:
        v = 0.f;
        break;
      case 4:
        v = -0.f;
        break;
      case 5:
        v = std::ldexp(static_cast<float>(pick(rng) + 1), -149);
        break;  // subnormal
      case 6:
        v = std::ldexp(1.f, ex(rng));
        break;
      default:
        break;
    }
    p[i] = v;
  }
  return t;
}

void expect_hist(const Histogram& a, const Histogram& b, const std::string& tag) {
  EXPECT_EQ(a.counts, b.counts) << tag;
  EXPECT_EQ(std::tie(a.lo, a.hi, a.log_x), std::tie(b.lo, b.hi, b.log_x))
      << tag << ": (lo, hi, log_x)";
  EXPECT_EQ(std::tie(a.below, a.above, a.nonfinite, a.zeros),
            std::tie(b.below, b.above, b.nonfinite, b.zeros))
      << tag << ": (below, above, nonfinite, zeros)";
}

std::vector<uint64_t> aligned(const ExponentHistogram& h, int lo, int hi) {
  std::vector<uint64_t> out(static_cast<size_t>(hi - lo + 1), 0);
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const int e = h.emin + static_cast<int>(i);
    if (e >= lo && e <= hi) out[static_cast<size_t>(e - lo)] += h.counts[i];
  }
  return out;
}

bool any(const ExponentHistogram& h) {
  for (uint64_t c : h.counts)
    if (c) return true;
  return false;
}

// Every view of `a` against the reference functions on its own input and values.
void expect_reference_views(const Analysis& a, const AnalysisOptions& ao, const std::string& tag) {
  ASSERT_FALSE(a.on_device) << tag;
  ASSERT_TRUE(a.input && a.values) << tag;
  const Tensor& x = a.input;
  const Tensor& q = a.values.host();
  const float* xp = x.ptr<float>();
  const float* qp = q.ptr<float>();
  const int64_t n = x.numel();
  const Stats s = compute_stats(x, q, a.stats.clipped);
  EXPECT_EQ(a.stats.count, s.count) << tag;
  EXPECT_EQ(a.stats.nonfinite_in, s.nonfinite_in) << tag;
  EXPECT_EQ(a.stats.nonfinite_out, s.nonfinite_out) << tag;
  EXPECT_EQ(a.stats.zeros_out, s.zeros_out) << tag;
  EXPECT_EQ(a.stats.max_abs_err, s.max_abs_err) << tag;
  EXPECT_NEAR(a.stats.mse, s.mse, 1e-12 * std::fabs(s.mse)) << tag;
  if (std::isinf(s.snr_db))
    EXPECT_EQ(a.stats.snr_db, s.snr_db) << tag;
  else
    EXPECT_NEAR(a.stats.snr_db, s.snr_db, 1e-9) << tag;
  EXPECT_NEAR(a.stats.mean_err, s.mean_err, 1e-12 * std::fabs(s.signal_power) + 1e-300) << tag;
  double amax = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(xp[i])) amax = std::max(amax, std::fabs(static_cast<double>(xp[i])));
  EXPECT_EQ(a.absmax, amax) << tag;
  const int bins = std::max(8, ao.bins);
  const double lim = amax > 0 ? amax * 1.02 : 1.0;
  expect_hist(a.value_orig, histogram(xp, n, -lim, lim, bins), tag + " value_orig");
  expect_hist(a.value_cast, histogram(qp, n, -lim, lim, bins), tag + " value_cast");
  const ExponentHistogram eo = exponent_histogram(xp, n), ec = exponent_histogram(qp, n);
  int lo = 0, hi = 0;
  if (any(eo) || any(ec)) {
    lo = any(eo) ? eo.emin : ec.emin;
    hi = any(eo) ? eo.emax : ec.emax;
    if (any(ec)) lo = std::min(lo, ec.emin), hi = std::max(hi, ec.emax);
  }
  EXPECT_EQ(a.exp_lo, lo) << tag;
  EXPECT_EQ(a.exp_hi, hi) << tag;
  EXPECT_EQ(a.exp_orig, aligned(eo, lo, hi)) << tag;
  EXPECT_EQ(a.exp_cast, aligned(ec, lo, hi)) << tag;
  EXPECT_EQ(a.exp_zero_orig, eo.zeros) << tag;
  EXPECT_EQ(a.exp_zero_cast, ec.zeros) << tag;
  expect_hist(a.log_orig, histogram(xp, n, lo, hi + 1.0, bins, true), tag + " log_orig");
  expect_hist(a.log_cast, histogram(qp, n, lo, hi + 1.0, bins, true), tag + " log_cast");
  const double elim = s.max_abs_err > 0 ? s.max_abs_err * 1.02 : 1.0;
  expect_hist(a.error, error_histogram(xp, qp, n, -elim, elim, bins), tag + " error");
  // The mask: elements cast to zero, or the sparsity mask's kept elements.
  std::vector<uint8_t> set(static_cast<size_t>(n));
  const bool sparse = a.mask.what.rfind("kept by", 0) == 0;
  for (int64_t i = 0; i < n; ++i)
    set[static_cast<size_t>(i)] = sparse ? 0 : (std::isfinite(xp[i]) && xp[i] != 0 && qp[i] == 0);
  if (!sparse) {
    const widgets::MaskImage m = widgets::mask_image(set.data(), x.shape(), ao.mask_max_side, "");
    EXPECT_EQ(a.mask.fraction, m.fraction) << tag;
    EXPECT_EQ(a.mask.set, m.set) << tag;
    EXPECT_EQ(a.mask.total, m.total) << tag;
  } else {
    // 2:4 sparsity keeps half of every group of four along the rows.
    EXPECT_EQ(a.mask.set * 2, a.mask.total) << tag;
  }
}

// A datatype cast on the CPU along an axis of a hard input.
struct AxisCase {
  const char* dtype;
  Shape shape;
  int axis;
  bool finite;  // NaN / Inf make every NVFP4 value and most channels NaN: also without them

  // hard_input() of the case's shape, its NaN and Inf replaced by 1.5 where the case is finite.
  Tensor input(uint64_t seed) const {
    Tensor x = hard_input(shape, seed);
    if (finite) {
      float* p = x.mutable_ptr<float>();
      for (int64_t i = 0; i < x.numel(); ++i)
        if (!std::isfinite(p[i])) p[i] = 1.5f;
    }
    return x;
  }

  CastOptions options() const {
    CastOptions o;
    o.device = Device::CPU;
    o.axis = axis;
    return o;
  }
};

TEST(HostViews, EveryViewEqualsTheReferenceFunctions) {
  const uint64_t seed = test::test_seed();
  // More than one pass chunk (65536 elements), chunks that start inside a row, leading dims
  // folded into rows, cells that do not divide rows or columns, a 2:4 sparse mask, tensor-scaled,
  // unscaled and TCFP datatypes.
  const AxisCase cases[] = {
      {"mxfp8e4", {3, 97, 160}, -1, false},      {"nvfp4", {517, 300}, -1, false},
      {"mxfp4e2", {2, 100000}, -1, false},       {"e4m3fn_e8m0_t32n2m4", {130, 64}, -1, false},
      {"fp8e4_block128", {200, 136}, -1, false}, {"fp8e4_tensor", {64, 70}, -1, false},
      {"float8_e5m2", {33, 257}, -1, false},     {"tcfp8", {96, 64}, -1, false},
      {"int8_sc", {300, 700}, -1, false}};
  AnalysisOptions ao;
  ao.device = false;
  ao.bins = 200;
  ao.mask_max_side = 64;
  uint64_t k = 0;
  for (const AxisCase& c : cases) {
    const std::string tag = std::string(c.dtype) + " seed " + std::to_string(seed);
    const Tensor x = c.input(seed + ++k);
    const auto a = widgets::analyze(x, DataType::parse(c.dtype), c.options(), "t", ao);
    expect_reference_views(*a, ao, tag);
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (!a || !b) return !a && !b;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) ==
             0;
}

// The scales, zero points, masks, metadata and counts of two casts: the same bytes and numbers.
void expect_same_scales_masks_counts(const CastResult& a, const CastResult& b,
                                     const std::string& tag) {
  EXPECT_TRUE(same_bytes(a.scale, b.scale)) << tag;
  EXPECT_TRUE(same_bytes(a.zero, b.zero)) << tag;
  EXPECT_TRUE(same_bytes(a.tenscale, b.tenscale)) << tag;
  EXPECT_TRUE(same_bytes(a.mask, b.mask)) << tag;
  EXPECT_TRUE(same_bytes(a.meta, b.meta)) << tag;
  EXPECT_EQ(a.counts.clipped, b.counts.clipped) << tag;
  EXPECT_EQ(a.counts.nonfinite, b.counts.nonfinite) << tag;
  EXPECT_EQ(a.counts.pruned, b.counts.pruned) << tag;
}

// The views' one-run cast of a tiled datatype: its codes, scales, masks and counts are the actual
// cast's, its values the virtual cast's, bit for bit (NaN payloads included), also along an axis
// that is not the last (a permuted run).
TEST(HostViews, OneRunCastEqualsActualAndVirtualCasts) {
  const uint64_t seed = test::test_seed();
  const AxisCase cases[] = {{"mxfp8e4", {3, 97, 160}, -1, false},
                            {"nvfp4", {517, 300}, -1, false},
                            {"nvfp4", {517, 300}, -1, true},
                            {"mxfp4e2", {300, 260}, 0, false},
                            {"e4m3fn_e8m0_t32n2m4", {130, 64}, -1, false},
                            {"fp8e4_block128", {200, 136}, -1, false},
                            {"int8_sc", {300, 700}, -1, true},
                            {"mxint8", {70, 96}, -1, false},
                            {"mxfp6e3", {2, 70000}, -1, false}};
  uint64_t k = 0;
  for (const AxisCase& c : cases) {
    const std::string tag = std::string(c.dtype) + " seed " + std::to_string(seed);
    const Tensor x = c.input(seed + ++k);
    const DataType d = DataType::parse(c.dtype);
    CastOptions o = c.options();
    o.mode = CastMode::Actual;
    const CastResult both = cpu::cast_standard_with_values(x, d, o);
    const CastResult actual = cast(x, d, o);
    o.mode = CastMode::Virtual;
    const CastResult virt = cast(x, d, o);
    EXPECT_TRUE(same_bytes(both.values, virt.values)) << tag;
    EXPECT_TRUE(same_bytes(both.codes, actual.codes)) << tag;
    expect_same_scales_masks_counts(both, actual, tag);
    EXPECT_EQ(both.mode, CastMode::Actual) << tag;
    // Without the codes (the views' cast): the same values, scales, masks and counts.
    o.mode = CastMode::Actual;
    const CastResult views = cpu::cast_standard_with_values(x, d, o, false);
    EXPECT_FALSE(views.codes) << tag;
    EXPECT_TRUE(same_bytes(views.values, virt.values)) << tag;
    expect_same_scales_masks_counts(views, actual, tag);
  }
  CastOptions v;
  v.mode = CastMode::Virtual;
  EXPECT_THROW(
      cpu::cast_standard_with_values(hard_input({4, 32}, seed), DataType::parse("mxfp8e4"), v),
      Error);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The tile map the histogram pass computes from its chunks (tiles that are runs of the storage)
// equals tile_map()'s bit for bit, NaN SNRs of tiles with a non-finite cast included; shapes
// that it leaves to tile_map() (2-D tiles, a partial last tile, channels that do not divide the
// pass's chunks, another axis) give the same too.
TEST(HostViews, TileMapEqualsTileMap) {
  const uint64_t seed = test::test_seed();
  const AxisCase cases[] = {
      {"mxfp8e4", {3, 97, 160}, -1, false}, {"nvfp4", {517, 320}, -1, false},
      {"nvfp4", {517, 320}, -1, true},      {"nvfp4", {517, 300}, -1, true},
      {"mxfp4e2", {2, 100000}, -1, false},  {"int8_sc", {64, 1024}, -1, true},
      {"int8_sc", {300, 700}, -1, true},    {"fp8e4_block128", {200, 136}, -1, false},
      {"mxfp6e3", {300, 256}, 0, false}};
  uint64_t k = 0;
  AnalysisOptions ao;
  ao.device = false;
  ao.keep_values = true;
  for (const AxisCase& c : cases) {
    const std::string tag = std::string(c.dtype) + " seed " + std::to_string(seed);
    const Tensor x = c.input(seed + ++k);
    const DataType d = DataType::parse(c.dtype);
    CastOptions o = c.options();
    const auto a = widgets::analyze(x, d, o, "t", ao);
    ASSERT_TRUE(a->tiles.has_value()) << tag << ": " << a->tiles_note;
    o.mode = CastMode::Actual;
    const TileMap m = tile_map(x, a->values.host(), cast(x, d, o));
    const TileMap& t = *a->tiles;
    EXPECT_EQ(t.rows, m.rows) << tag;
    EXPECT_EQ(t.cols, m.cols) << tag;
    EXPECT_EQ(t.tile_rows, m.tile_rows) << tag;
    EXPECT_EQ(t.tile_cols, m.tile_cols) << tag;
    EXPECT_EQ(t.scale_code, m.scale_code) << tag;
    EXPECT_TRUE(same_bits(t.scale_value, m.scale_value)) << tag;
    EXPECT_TRUE(same_bits(t.absmax, m.absmax)) << tag;
    EXPECT_TRUE(same_bits(t.snr_db, m.snr_db)) << tag;
  }
}

// The input's own views carried from one analysis to the next (as the app holds them in a
// DeviceInput) equal those computed afresh, also when a cast widens the exponent range (log
// histograms over another range) or another tensor takes the cache's place.
TEST(HostViews, InputViewsCarriedOverEqualFreshOnes) {
  const uint64_t seed = test::test_seed();
  const Tensor x = hard_input({300, 260}, seed);
  const Tensor y = hard_input({300, 260}, seed + 1);
  AnalysisOptions ao;
  ao.device = false;
  ao.mask_max_side = 64;
  CastOptions o;
  o.device = Device::CPU;
  widgets::DeviceInput input;
  for (const Tensor* t : {&x, &y}) {
    // mxint8 flushes small values to zero; e5m2 keeps binades the input does not have after
    // rounding up; nvfp4 and mxfp4e2 round many values to other binades.
    for (const char* name : {"mxfp8e4", "mxint8", "float8_e5m2", "nvfp4", "mxfp4e2", "mxfp8e4"}) {
      const std::string tag = std::string(name) + " seed " + std::to_string(seed);
      const DataType d = DataType::parse(name);
      const auto fresh = widgets::analyze(*t, d, o, "t", ao);
      const auto kept = widgets::analyze(*t, d, o, "t", ao, nullptr, &input);
      expect_hist(kept->value_orig, fresh->value_orig, tag);
      expect_hist(kept->log_orig, fresh->log_orig, tag);
      expect_hist(kept->log_cast, fresh->log_cast, tag);
      EXPECT_EQ(kept->exp_orig, fresh->exp_orig) << tag;
      EXPECT_EQ(kept->exp_lo, fresh->exp_lo) << tag;
      EXPECT_EQ(kept->exp_zero_orig, fresh->exp_zero_orig) << tag;
      EXPECT_EQ(kept->absmax, fresh->absmax) << tag;
      expect_reference_views(*kept, ao, tag);
    }
  }
}

// Values on and next to every bin edge of the log histogram: the table of significand steps must
// put each in the bin std::log2 puts it in.
TEST(HostViews, LogHistogramBinEdges) {
  const uint64_t seed = test::test_seed();
  AnalysisOptions ao;
  ao.device = false;
  ao.mask_max_side = 32;
  std::mt19937_64 rng(seed);
  for (int bins : {8, 96, 1000}) {
    // Exponents span [-20, 9]: the log histogram covers [-20, 10].
    std::vector<float> v = {std::ldexp(1.f, -20), std::ldexp(1.99f, 9)};
    const double w = 30.0 / bins;
    for (int b = 0; b <= bins; ++b) {
      const float edge = static_cast<float>(std::exp2(-20.0 + b * w));
      // The range's own ends stay inside it: 2^-20 is its least value, 2^10 is outside.
      float lo = edge, hi = edge;
      for (int u = 0; u < 3; ++u) {
        lo = std::nextafter(lo, 0.f), hi = std::nextafter(hi, 1e30f);
        if (b > 0 && b < bins) v.push_back(lo);  // below 2^10 bfloat16 rounds up to it
        if (b < bins) v.push_back(-hi);
      }
      if (b < bins) v.push_back(edge);
    }
    std::shuffle(v.begin() + 2, v.end(), rng);
    v.resize((v.size() + 63) / 64 * 64, 1.f);
    Tensor x = Tensor::empty(DType::F32, {static_cast<int64_t>(v.size() / 64), 64});
    std::memcpy(x.mutable_ptr<float>(), v.data(), v.size() * 4);
    ao.bins = bins;
    CastOptions o;
    o.device = Device::CPU;
    const auto a = widgets::analyze(x, DataType::parse("bfloat16"), o, "t", ao);
    const std::string tag = "bins " + std::to_string(bins) + " seed " + std::to_string(seed);
    ASSERT_EQ(a->exp_lo, -20) << tag;
    ASSERT_EQ(a->exp_hi, 9) << tag;
    expect_hist(a->log_orig, histogram(x.ptr<float>(), x.numel(), -20, 10, bins, true),
                tag + " log_orig");
    expect_hist(a->log_cast,
                histogram(a->values.host().ptr<float>(), x.numel(), -20, 10, bins, true),
                tag + " log_cast");
  }
}

// The statistics reach on_metrics before the histograms are computed, and equal the final ones.
TEST(HostViews, MetricsComeFirst) {
  const Tensor x = hard_input({256, 256}, test::test_seed());
  AnalysisOptions ao;
  ao.device = false;
  Stats early;
  bool histograms_empty = false;
  int calls = 0;
  ao.on_metrics = [&](const Analysis& a) {
    early = a.stats;
    histograms_empty = a.value_orig.counts.empty() && !a.tiles;
    ++calls;
  };
  CastOptions o;
  o.device = Device::CPU;
  const auto a = widgets::analyze(x, DataType::parse("mxfp8e4"), o, "t", ao);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(histograms_empty);
  EXPECT_EQ(early.count, a->stats.count);
  EXPECT_EQ(early.mse, a->stats.mse);
  EXPECT_FALSE(a->value_orig.counts.empty());
}

}  // namespace
}  // namespace castscope

namespace castscope {

// Storage kept for reuse (set_storage_reuse, on in the app) serves the next tensor of the same
// size, and a zero-initialised tensor made from it is zero again.
TEST(HostViews, ReusedStorageServesTheSameSizeAndIsZeroedForEmpty) {
#if defined(__linux__)
  set_storage_reuse(size_t{64} << 20);
  const Shape big{1024, 1024};  // 4 MiB: mapped storage
  const void* first = nullptr;
  {
    Tensor a = Tensor::empty(DType::F32, big);
    first = a.data();
    float* p = a.mutable_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) p[i] = 1.5f;
  }
  {
    Tensor b = Tensor::empty(DType::F32, big);
    EXPECT_EQ(b.data(), first) << "the freed storage was not reused";
    const float* q = b.ptr<float>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < b.numel(); ++i) nonzero += q[i] != 0;
    EXPECT_EQ(nonzero, 0);
    // Another size takes fresh storage while b holds the first.
    Tensor c = Tensor::uninitialized(DType::F32, {512, 1024});
    EXPECT_NE(c.data(), first);
  }
  set_storage_reuse(0);  // hands everything kept back
  Tensor d = Tensor::empty(DType::F32, big);
  EXPECT_EQ(d.ptr<float>()[12345], 0.0f);
#endif
}

}  // namespace castscope
