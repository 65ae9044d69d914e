// The model map's tensor stream (cuda/sweep_pipeline.hpp): tensors of a bf16 safetensors file
// cut into slices smaller than themselves, staged, uploaded and widened on the device, arrive in
// order with the bits io::Model::load gives; and the map sweep through it gives the CPU sweep's
// cells without uploading any tensor the ordinary way.
#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "gpu_test_util.hpp"

#include "backends/device_api.hpp"
#include "castscope/io.hpp"
#include "castscope/modelmap.hpp"
#include "backends/cuda/sweep_pipeline.hpp"

namespace castscope::gputest {
namespace {

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// A safetensors file of bf16 tensors (the values of `tensors`, rounded to bf16).
std::string write_bf16_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  char tmpl[] = "/tmp/castscope_sweep_XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  std::remove(tmpl);
  const std::string path = std::string(tmpl) + ".safetensors";
  std::string header = "{";
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    std::string shape;
    for (int64_t d : t.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const uint64_t n = static_cast<uint64_t>(t.numel()) * 2;
    header += (off || header.size() > 1 ? "," : "") + std::string("\"") + name +
              "\":{\"dtype\":\"BF16\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(off) + "," + std::to_string(off + n) + "]}";
    off += n;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary);
  const uint64_t hl = header.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& [name, t] : tensors) {
    std::vector<uint16_t> b(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      b[static_cast<size_t>(i)] = bf16_bits(t.ptr<float>()[i]);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size() * 2));
  }
  return path;
}

std::vector<std::pair<std::string, Tensor>> layer(uint64_t seed) {
  return {
      {"model.layers.0.self_attn.q_proj.weight", random_input({640, 1024}, seed + 1, 6.0, 7.0)},
      {"model.layers.0.input_layernorm.weight", random_input({1024}, seed + 2, 6.0, 7.0)},
      {"model.layers.0.mlp.up_proj.weight", random_input({1500, 1024}, seed + 3, 448.0, 464.0)},
      {"model.layers.0.mlp.down_proj.weight", random_input({1024, 96}, seed + 4, 6.0, 7.0)},
      {"model.layers.1.mlp.up_proj.weight", random_input({33, 1024}, seed + 5, 6.0, 7.0)},
  };
}

TEST(GpuSweepStream, SlicedTensorsArriveInOrderWithTheLoadedBits) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const std::string path = write_bf16_safetensors(layer(seed));
  const auto model = io::open_model(path);
  std::vector<std::string> names;
  for (const io::TensorInfo& t : model->tensors()) names.push_back(t.name);
  // Slots of 1 MiB against tensors up to 3 MiB: several slices a tensor, and a device bound of one
  // byte, so each tensor waits for the one before it to be taken.
  gpu::TensorStreamOptions so;
  so.readers = 3;
  so.slots = 2;
  so.slot_bytes = 1u << 20;
  so.device_ahead = 1;
  for (int round = 0; round < 2; ++round) {
    auto stream = gpu::open_tensor_stream(*model, names, so);
    ASSERT_TRUE(stream);
    for (const std::string& n : names) {
      const gpu::DeviceTensor d = stream->next();
      ASSERT_TRUE(d) << n;
      EXPECT_EQ(d.dtype(), DType::F32) << n;
      EXPECT_EQ(tensor_diff(n.c_str(), model->load(n), d.download()), "") << "seed " << seed;
    }
    so.readers = 1;
    so.device_ahead = 1ull << 30;
  }
  // Destroyed before every tensor was taken: the threads stop.
  { auto stream = gpu::open_tensor_stream(*model, names, so); }
  std::remove(path.c_str());
}

TEST(GpuSweepStream, MapThroughTheStreamGivesTheCpuCells) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const std::string path = write_bf16_safetensors(layer(seed + 10));
  const auto model = io::open_model(path);
  MapOptions o;
  o.dtypes = {"mxfp4e2", "nvfp4", "mxfp6e2", "mxfp8e4", "mx6", "int8_sc", "tcfp12"};
  o.include_1d = true;
  o.cast.device = Device::CUDA;
  const uint64_t uploads = gpu::transfer_counters().uploads;
  const ModelMap g = sweep_model(*model, o);
  // Every tensor came through the stream, none through a host load and upload.
  EXPECT_EQ(gpu::transfer_counters().uploads, uploads);
  o.cast.device = Device::CPU;
  const ModelMap c = sweep_model(*model, o);
  EXPECT_EQ(g.backend, "cuda");
  ASSERT_EQ(g.rows.size(), 5u);
  expect_same_map(c, g, o.dtypes, seed);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace castscope::gputest
