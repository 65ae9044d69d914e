// Device memory owned by another library (DeviceTensor::borrow) goes through a cast without a
// host round trip and gives the CPU engine's bits.
#include <memory>

#include "backends/device_api.hpp"
#include "gpu_test_util.hpp"

namespace castscope {
namespace {

using gputest::cpu_cast;
using gputest::random_input;
using gputest::result_diff;
using gputest::run_seed;

TEST(GpuBorrow, CastOfBorrowedMemoryMatchesCpuWithoutTransfers) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  for (const char* name : {"mxfp4e2", "nvfp4", "mx9", "e4m3fn_float32_t128_t128"}) {
    const DataType d = DataType::parse(name);
    const Tensor x = random_input({256, 384}, seed, d.number().max(), d.number().midmax());
    // Another owner's allocation: the uploaded tensor stands in for a framework's buffer.
    auto owner = std::make_shared<gpu::DeviceTensor>(gpu::DeviceTensor::upload(x));
    const gpu::DeviceTensor borrowed =
        gpu::DeviceTensor::borrow(x.dtype(), x.shape(), owner, owner->mutable_data());
    EXPECT_EQ(borrowed.data(), owner->data());
    for (CastMode mode : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
      CastOptions o;
      o.mode = mode;
      const gpu::TransferCounters before = gpu::transfer_counters();
      const gpu::DeviceCastResult r = gpu::cast(borrowed, d, o);
      gpu::synchronize();
      const gpu::TransferCounters after = gpu::transfer_counters();
      EXPECT_EQ(after.uploads, before.uploads) << name;
      EXPECT_EQ(after.downloads, before.downloads) << name;
      EXPECT_EQ(result_diff(cpu_cast(x, d, o), r.download()), "")
          << name << " mode " << to_string(mode) << " seed " << seed;
    }
  }
}

TEST(GpuBorrow, HostMemoryIsRefused) {
  CS_REQUIRE_GPU();
  Tensor h = Tensor::empty(DType::F32, {4});
  EXPECT_THROW(gpu::DeviceTensor::borrow(DType::F32, {4}, nullptr, h.mutable_data()), Error);
}

TEST(GpuBorrow, TransfersAreCounted) {
  CS_REQUIRE_GPU();
  const Tensor x = Tensor::empty(DType::F32, {1000});
  const gpu::TransferCounters a = gpu::transfer_counters();
  const Tensor back = gpu::DeviceTensor::upload(x).download();
  const gpu::TransferCounters b = gpu::transfer_counters();
  EXPECT_EQ(b.uploads - a.uploads, 1u);
  EXPECT_EQ(b.downloads - a.downloads, 1u);
  EXPECT_EQ(b.upload_bytes - a.upload_bytes, 4000u);
  EXPECT_EQ(b.download_bytes - a.download_bytes, 4000u);
}

}  // namespace
}  // namespace castscope
