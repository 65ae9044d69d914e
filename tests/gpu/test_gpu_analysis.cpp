// The app's analysis computed on the device against the same analysis on the host: every count,
// histogram, tile map and mask image equal, sums up to summation order; the input uploaded once
// per tensor and the cast values left on the device.
#include <cmath>

#include "backends/device_api.hpp"
#include "castscope/widgets/analysis.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

using widgets::Analysis;
using widgets::AnalysisOptions;

// Bitwise, so that NaN scales and +inf SNRs compare too.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void expect_same_views(const Analysis& h, const Analysis& d, const std::string& tag) {
  EXPECT_FALSE(h.on_device) << tag;
  EXPECT_TRUE(d.on_device) << tag << ": " << d.device_note;
  EXPECT_EQ(d.backend, "cuda") << tag;
  expect_same_stats(h.stats, d.stats, tag);
  EXPECT_EQ(h.absmax, d.absmax) << tag;
  expect_hist(h.value_orig, d.value_orig, tag + " value_orig");
  expect_hist(h.value_cast, d.value_cast, tag + " value_cast");
  expect_hist(h.log_orig, d.log_orig, tag + " log_orig");
  expect_hist(h.log_cast, d.log_cast, tag + " log_cast");
  expect_hist(h.error, d.error, tag + " error");
  EXPECT_EQ(h.exp_lo, d.exp_lo) << tag;
  EXPECT_EQ(h.exp_hi, d.exp_hi) << tag;
  EXPECT_EQ(h.exp_orig, d.exp_orig) << tag;
  EXPECT_EQ(h.exp_cast, d.exp_cast) << tag;
  EXPECT_EQ(h.exp_zero_orig, d.exp_zero_orig) << tag;
  EXPECT_EQ(h.exp_zero_cast, d.exp_zero_cast) << tag;
  EXPECT_EQ(h.rep_lo, d.rep_lo) << tag;
  EXPECT_EQ(h.rep_hi, d.rep_hi) << tag;
  ASSERT_EQ(h.tiles.has_value(), d.tiles.has_value()) << tag << ": " << d.tiles_note;
  EXPECT_EQ(h.tiles_note, d.tiles_note) << tag;
  if (h.tiles) {
    EXPECT_EQ(h.tiles->rows, d.tiles->rows) << tag;
    EXPECT_EQ(h.tiles->cols, d.tiles->cols) << tag;
    EXPECT_EQ(h.tiles->scale_code, d.tiles->scale_code) << tag;
    EXPECT_TRUE(same_bits(h.tiles->scale_value, d.tiles->scale_value)) << tag;
    EXPECT_TRUE(same_bits(h.tiles->absmax, d.tiles->absmax)) << tag;
    EXPECT_TRUE(same_bits(h.tiles->snr_db, d.tiles->snr_db)) << tag;
  }
  EXPECT_EQ(h.mask.what, d.mask.what) << tag;
  EXPECT_EQ(h.mask.out_rows, d.mask.out_rows) << tag;
  EXPECT_EQ(h.mask.out_cols, d.mask.out_cols) << tag;
  EXPECT_EQ(h.mask.set, d.mask.set) << tag;
  EXPECT_EQ(h.mask.total, d.mask.total) << tag;
  EXPECT_EQ(h.mask.fraction, d.mask.fraction) << tag;
}

TEST(GpuAnalysis, DeviceViewsEqualHostViews) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  struct Case {
    const char* dtype;
    Shape shape;
  };
  // Leading dims that fold into rows, rows and columns that do not divide the mask image's
  // cells, a 2:4 sparse mask, tensor-scaled, unscaled and TCFP datatypes (no tile map).
  const Case cases[] = {{"mxfp8e4", {3, 97, 160}},      {"nvfp4", {300, 64}},
                        {"mxfp4e2", {517, 96}},         {"e4m3fn_e8m0_t32n2m4", {130, 64}},
                        {"fp8e4_block128", {200, 136}}, {"fp8e4_tensor", {64, 70}},
                        {"float8_e5m2", {33, 257}},     {"tcfp8", {96, 64}}};
  AnalysisOptions host_ao, dev_ao;
  host_ao.device = false;
  host_ao.mask_max_side = dev_ao.mask_max_side = 64;
  host_ao.bins = dev_ao.bins = 200;
  uint64_t k = 0;
  for (const Case& c : cases) {
    const std::string tag = std::string(c.dtype) + " seed " + std::to_string(seed);
    const Tensor x = random_input(c.shape, seed + ++k, 448.0, 464.0);
    const DataType d = DataType::parse(c.dtype);
    const auto h = widgets::analyze(x, d, {}, "t", host_ao);
    const auto g = widgets::analyze(x, d, {}, "t", dev_ao);
    expect_same_views(*h, *g, tag);
    // The teaching view's block of values, read back from the device.
    ASSERT_TRUE(g->values.on_device()) << tag;
    const auto [R, C] = widgets::fold_2d(x.shape());
    const int64_t r0 = R / 3, c0 = C / 2;
    const Tensor hb = widgets::values_block(*h, r0, c0, 5, C),
                 gb = widgets::values_block(*g, r0, c0, 5, C);
    EXPECT_EQ(tensor_diff("values block", hb, gb), "") << tag;
    EXPECT_EQ(gb.shape(), (Shape{5, C - c0})) << tag;
  }
}

TEST(GpuAnalysis, InputUploadedOnceAndValuesLeftOnTheDevice) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const Tensor x = random_input({512, 1024}, seed, 448.0, 464.0);
  widgets::DeviceInput input;
  const gpu::TransferCounters t0 = gpu::transfer_counters();
  for (const char* d : {"mxfp8e4", "nvfp4", "mxint8", "mxfp4e2"}) {
    const auto a = widgets::analyze(x, DataType::parse(d), {}, "t", {}, nullptr, &input);
    EXPECT_TRUE(a->on_device) << d << ": " << a->device_note;
  }
  const gpu::TransferCounters t1 = gpu::transfer_counters();
  EXPECT_EQ(t1.uploads - t0.uploads, 1u) << "seed " << seed;
  EXPECT_EQ(t1.upload_bytes - t0.upload_bytes, x.nbytes()) << "seed " << seed;
  // Views come back (histograms, a few counts), never a tensor-sized copy.
  EXPECT_LT(t1.download_bytes - t0.download_bytes, x.nbytes() / 8) << "seed " << seed;
  // Another tensor replaces the device copy.
  const Tensor y = random_input({64, 64}, seed + 1, 448.0, 464.0);
  widgets::analyze(y, DataType::parse("mxfp8e4"), {}, "u", {}, nullptr, &input);
  EXPECT_EQ(gpu::transfer_counters().uploads - t1.uploads, 1u);
}

TEST(GpuAnalysis, HostTakesOverWhereTheDeviceCannot) {
  CS_REQUIRE_GPU();
  const Tensor x = random_input({64, 128}, run_seed(), 448.0, 464.0);
  // Rotations wrap the host cast; codebooks keep their mappings' tile map on the host.
  CastOptions rot;
  rot.rotate = Rotation{32, false, 7};
  const auto r = widgets::analyze(x, DataType::parse("mxfp4e2"), rot, "t");
  EXPECT_FALSE(r->on_device);
  EXPECT_TRUE(r->values);
  const auto cb = widgets::analyze(x, DataType::parse("icb44fi4_e32"), {}, "t");
  EXPECT_FALSE(cb->on_device);
  ASSERT_TRUE(cb->tiles.has_value()) << cb->tiles_note;
  EXPECT_FALSE(cb->tiles->mapping.empty());
  // A bad request fails with the host's message, not a device one.
  CastOptions bad;
  bad.axis = 5;
  EXPECT_THROW(widgets::analyze(x, DataType::parse("mxfp8e4"), bad, "t"), Error);
}

}  // namespace
}  // namespace castscope::gputest
