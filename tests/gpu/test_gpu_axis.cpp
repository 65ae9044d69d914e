// Flattened quantization axes on the GPU: a conv weight cast over I*kh*kw gives the CPU's bytes,
// through castscope::cast and through the device-resident gpu::cast, and its device tile map is
// that of the [O, I*kh*kw] view.
#include "backends/device_api.hpp"
#include "castscope/metrics.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

TEST(GpuAxis, FlattenedConvCastsMatchCpu) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const Shape shapes[] = {{64, 3, 7, 7}, {256, 128, 3, 3}};
  const char* dtypes[] = {"mxfp8e4", "nvfp4", "e4m3fn_float32_t128_t128", "mx6", "tcfp12"};
  uint64_t k = 0;
  for (const Shape& s : shapes)
    for (const char* name : dtypes)
      for (CastMode mode : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
        const DataType d = DataType::parse(name);
        const Tensor x = random_input(s, seed + ++k, 448, 464);
        const std::string tag = std::string(name) + " " + shape_str(s) + " " + to_string(mode) +
                                " (seed " + std::to_string(seed) + ")";
        CastOptions o;
        o.mode = mode;
        o.axis_auto = true;
        o.device = Device::CPU;
        const CastResult cpu = cast(x, d, o);
        o.device = Device::CUDA;
        const CastResult gpu = cast(x, d, o);
        EXPECT_EQ(gpu.backend, "cuda") << tag;
        EXPECT_TRUE(gpu.options.flatten) << tag;
        EXPECT_EQ(result_diff(cpu, gpu), "") << tag;
        const CastResult dev =
            gpu::cast(gpu::DeviceTensor::upload(x), d, o, mode != CastMode::Virtual).download();
        EXPECT_EQ(dev.shape, s) << tag;
        EXPECT_EQ(result_diff(cpu, dev), "") << tag;
      }
}

TEST(GpuAxis, FlattenedTileMapIsTheViewsMap) {
  CS_REQUIRE_GPU();
  const Tensor x = random_input({32, 16, 3, 3}, run_seed(), 448, 464);
  const DataType d = DataType::parse("mxfp8e4");
  CastOptions o;
  o.mode = CastMode::Actual;
  AxisSpec::parse("1:").apply(o);
  const gpu::DeviceTensor dx = gpu::DeviceTensor::upload(x);
  const gpu::DeviceCastResult r = gpu::cast(dx, d, o, true);
  const TileMap g = gpu::tile_map(dx, r.values, r);
  o.device = Device::CPU;
  const CastResult c = cast(x, d, o);
  const TileMap h = tile_map(x, upcast(c), c);
  EXPECT_EQ(g.rows, 32);
  EXPECT_EQ(g.cols, 5);  // ceil(144 / 32)
  EXPECT_EQ(g.rows, h.rows);
  EXPECT_EQ(g.cols, h.cols);
  EXPECT_EQ(g.scale_code, h.scale_code);
}

}  // namespace
}  // namespace castscope::gputest
