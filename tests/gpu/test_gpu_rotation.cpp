// Block Hadamard rotation on the GPU against the CPU, bit for bit: the transform alone (every
// size, with and without signs, forward and inverse, strided axes) and rotated casts.
#include "gpu_test_util.hpp"

#include "backends/device_api.hpp"
#include "castscope/export.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/rotate.hpp"
#include "rotation/rotation_backend.hpp"

namespace castscope::gputest {
namespace {

TEST(GpuRotation, TransformMatchesCpuBitForBit) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 0;
  for (int n : {16, 32, 64, 128, 256})
    for (bool signs : {false, true})
      for (bool inverse : {false, true})
        for (int axis : {-1, 0}) {
          const Shape shape = axis == -1 ? Shape{37, 2 * n} : Shape{2 * n, 3, 5};
          const Tensor x = random_input(shape, seed + ++k, 1e4, 2e4);
          const Rotation r{n, signs, seed ^ k};
          const Tensor c = rotate(x, r, axis, inverse, Device::CPU);
          const int ax = axis < 0 ? axis + x.rank() : axis;
          int64_t outer = 1, inner = 1;
          for (int i = 0; i < ax; ++i) outer *= shape[i];
          for (int i = ax + 1; i < x.rank(); ++i) inner *= shape[i];
          const Tensor g = cuda::rotate_f32(x, r, static_cast<float>(1.0 / std::sqrt(double(n))),
                                            outer, shape[ax], inner, inverse);
          EXPECT_EQ(tensor_diff("rotated", c, g), "")
              << "seed " << seed << " n=" << n << " signs=" << signs << " inverse=" << inverse
              << " axis=" << axis;
        }
}

TEST(GpuRotation, RotatedCastsMatchCpuBitForBit) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 100;
  for (const char* name : {"mxfp4e2", "nvfp4", "mxfp8e4", "mx6", "int8_float32_t0", "tcfp12"})
    for (CastMode m : {CastMode::Virtual, CastMode::Compress}) {
      const DataType d = DataType::parse(name);
      const Tensor x = random_input({40, 256}, seed + ++k, 6.0, 7.0);
      CastOptions o;
      o.mode = m;
      o.rotate = {64, true, seed + k};
      o.device = Device::CPU;
      const CastResult c = cast(x, d, o);
      o.device = Device::CUDA;
      const CastResult g = cast(x, d, o);
      EXPECT_EQ(g.backend, "cuda") << name;
      EXPECT_EQ(result_diff(c, g), "") << "seed " << seed << " " << name << " " << to_string(m);
      EXPECT_EQ(tensor_diff("upcast", upcast(c), upcast(g)), "") << name;
    }
}

TEST(GpuRotation, DeviceResidentCastRefusesARotation) {
  CS_REQUIRE_GPU();
  const gpu::DeviceTensor x = gpu::DeviceTensor::upload(random_input({4, 64}, run_seed(), 6, 7));
  CastOptions o;
  o.rotate = {32, false, 0};
  EXPECT_THROW(gpu::cast(x, DataType::parse("mxfp4e2"), o), Error);
}

// The model map keeps each tensor on the device across its cells: same clipped counts and max
// errors as the CPU sweep, sums up to summation order.
TEST(GpuModelMap, DeviceSweepMatchesCpuSweep) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  MemoryModel m;
  m.add("model.layers.0.mlp.up_proj.weight", random_input({96, 256}, seed + 1, 6.0, 7.0));
  m.add("model.layers.0.mlp.down_proj.weight", random_input({256, 96}, seed + 2, 448.0, 464.0));
  MapOptions o;
  o.dtypes = {"mxfp4e2", "nvfp4", "mxfp8e4", "int8_sc", "e2m1_e32s8o2"};
  o.cast.device = Device::CUDA;
  const ModelMap g = sweep_model(m, o);
  o.cast.device = Device::CPU;
  const ModelMap c = sweep_model(m, o);
  EXPECT_EQ(g.backend, "cuda");
  EXPECT_EQ(c.backend, "cpu");
  expect_same_map(c, g, o.dtypes, seed);
}

}  // namespace
}  // namespace castscope::gputest
