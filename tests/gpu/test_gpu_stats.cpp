// Device statistics against metrics.hpp: counts and tile scales exact, sums to rounding.
#include <cmath>

#include "backends/device_api.hpp"
#include "castscope/metrics.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

TEST(GpuStats, MatchHostStatisticsHistogramsAndTileMaps) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const AxisCase cases[] = {{"mxfp8e4", {96, 160}, -1},
                            {"nvfp4", {33, 64}, -1},
                            {"fp8e4_block128", {200, 136}, -1},
                            {"int8_sc", {40, 3, 50}, 1},
                            {"mxint4", {64, 40}, 0}};
  uint64_t k = 0;
  for (const AxisCase& c : cases) {
    const std::string tag = std::string(c.dtype) + " seed " + std::to_string(seed);
    const Tensor x = random_input(c.shape, seed + ++k, 448.0, 464.0);
    const DataType d = DataType::parse(c.dtype);
    CastOptions o;
    o.mode = CastMode::Actual;
    o.axis = c.axis;
    const CastResult host = cpu_cast(x, d, o);
    const Tensor hv = upcast(host);

    const gpu::DeviceTensor dx = gpu::DeviceTensor::upload(x);
    const gpu::DeviceCastResult dr = gpu::cast(dx, d, o, true);
    EXPECT_EQ(tensor_diff("values", hv, dr.values.download()), "") << tag;

    const Stats cs = compute_stats(x, hv, host.counts.clipped);
    const Stats gs = gpu::compute_stats(dx, dr.values, dr.counts.clipped);
    expect_same_stats(cs, gs, tag);

    const float* vp = hv.ptr<float>();
    expect_hist(histogram(vp, hv.numel(), -8, 8, 64), gpu::histogram(dr.values, -8, 8, 64),
                "linear " + tag);
    expect_hist(histogram(vp, hv.numel(), -20, 10, 300, true),
                gpu::histogram(dr.values, -20, 10, 300, true), "log " + tag);
    expect_hist(histogram(vp, hv.numel(), -1, 1, 20000), gpu::histogram(dr.values, -1, 1, 20000),
                "many bins " + tag);
    expect_hist(error_histogram(x.ptr<float>(), vp, x.numel(), -0.25, 0.25, 128),
                gpu::error_histogram(dx, dr.values, -0.25, 0.25, 128), "error " + tag);
    const ExponentHistogram ce = exponent_histogram(vp, hv.numel()),
                            ge = gpu::exponent_histogram(dr.values);
    EXPECT_EQ(ce.emin, ge.emin) << tag;
    EXPECT_EQ(ce.emax, ge.emax) << tag;
    EXPECT_EQ(ce.counts, ge.counts) << tag;
    EXPECT_EQ(ce.zeros, ge.zeros) << tag;
    EXPECT_EQ(ce.nonfinite, ge.nonfinite) << tag;

    const TileMap ct = tile_map(x, hv, host), gt = gpu::tile_map(dx, dr.values, dr);
    // A view's window of the map left on the device: the same tiles as the full map.
    const gpu::DeviceTileMap dm = gpu::tile_map_device(dx, dr.values, dr);
    const int64_t r0 = dm.rows / 3, c0 = dm.cols / 2, h = dm.rows - r0 + 5, w = 3;
    const TileMap win = dm.window(r0, c0, h, w);
    ASSERT_EQ(win.rows, dm.rows - r0) << tag;  // clipped to the map
    ASSERT_EQ(win.cols, std::min<int64_t>(w, dm.cols - c0)) << tag;
    for (int64_t r = 0; r < win.rows; ++r)
      for (int64_t c = 0; c < win.cols; ++c) {
        const size_t wi = static_cast<size_t>(r * win.cols + c),
                     ci = static_cast<size_t>((r0 + r) * ct.cols + c0 + c);
        EXPECT_EQ(win.scale_code[wi], ct.scale_code[ci]) << tag << " window tile " << r << "," << c;
        EXPECT_EQ(win.absmax[wi], ct.absmax[ci]) << tag << " window tile " << r << "," << c;
      }
    EXPECT_THROW(dm.window(dm.rows, 0, 1, 1), Error) << tag;
    EXPECT_EQ(ct.rows, gt.rows) << tag;
    EXPECT_EQ(ct.cols, gt.cols) << tag;
    EXPECT_EQ(ct.scale_code, gt.scale_code) << tag;
    ASSERT_EQ(ct.snr_db.size(), gt.snr_db.size()) << tag;
    for (size_t i = 0; i < ct.snr_db.size(); ++i) {
      EXPECT_EQ(std::isnan(ct.scale_value[i]), std::isnan(gt.scale_value[i])) << tag;
      if (!std::isnan(ct.scale_value[i])) {
        EXPECT_EQ(ct.scale_value[i], gt.scale_value[i]) << tag;
      }
      EXPECT_EQ(ct.absmax[i], gt.absmax[i]) << tag << " tile " << i;
      if (std::isfinite(ct.snr_db[i])) {
        EXPECT_NEAR(ct.snr_db[i], gt.snr_db[i], 1e-4f) << tag << " tile " << i;
      } else {
        EXPECT_EQ(ct.snr_db[i], gt.snr_db[i]) << tag << " tile " << i;
      }
    }
  }
}

TEST(GpuStats, BadArgumentsAreErrors) {
  CS_REQUIRE_GPU();
  const gpu::DeviceTensor a = gpu::DeviceTensor::upload(random_input({8, 8}, run_seed(), 1, 1));
  const gpu::DeviceTensor b = gpu::DeviceTensor::upload(random_input({4, 8}, run_seed(), 1, 1));
  EXPECT_THROW(gpu::compute_stats(a, b), Error);
  EXPECT_THROW(gpu::histogram(a, 1, 0, 8), Error);
  EXPECT_THROW(gpu::histogram(a, 0, 1, 0), Error);
  CastOptions o;
  o.mode = CastMode::Virtual;
  const gpu::DeviceCastResult v = gpu::cast(a, DataType::parse("e4m3fn_e8m0_t8"), o);
  EXPECT_THROW(gpu::tile_map(a, v.values, v), Error);  // virtual result has no scales
}

TEST(GpuStats, EmptyAndUndefinedTensorsAreErrors) {
  CS_REQUIRE_GPU();
  EXPECT_THROW(gpu::DeviceTensor::upload(Tensor()), Error);
  EXPECT_THROW(gpu::cast(gpu::DeviceTensor(), DataType::parse("mxfp8e4"), {}), Error);
}

// castscope-bench --only takes names of its own cast table; a misspelt one is an error that
// lists them, raised before any measurement (so with or without a GPU).
TEST(GpuBench, UnknownCastNamesAreErrors) {
  gpu::BenchOptions o;
  o.only = {"mxfp4e2", "mxfp4e3"};
  try {
    gpu::run_benchmark(o, stdout);
    ADD_FAILURE() << "no error for an unknown cast name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mxfp4e3'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("icb44fi3_f32s8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace castscope::gputest
