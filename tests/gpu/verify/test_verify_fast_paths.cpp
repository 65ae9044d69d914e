// The cast kernels' fast paths against the shared scalar code over every input of a kind (the
// kernels are in verify_fast_paths.cu and verify_pairs.cu beside this file; built only with the
// CUDA backend, see extra.cmake).
#include <cstring>
#include <vector>

#include "castscope/datatype.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"
#include "gpu_test_util.hpp"
#include "core/plan.hpp"
#include "verify/verify_kernels.hpp"

namespace castscope::gputest {
namespace {

// The float-arithmetic rounding of the fast kernels against the shared scalar::quantize on every
// float32 input and random doubles, for every data grid a registry datatype uses; with it the
// exponent-scale choice from float bits against scalar::select_exponent (every positive float32,
// every scale mode) and, for the e2m1 grid, NVFP4's threshold codes and float scale choice.
TEST(GpuCast, FastQuantizerEqualsSharedQuantizerExhaustively) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  std::vector<scalar::Format> seen;
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    if (d.family() != Family::Standard) continue;
    const scalar::Format f = detail::make_plan({256, 256}, d, {}).data;
    if (!gpu::detail::fast_quantizer_applies(f)) continue;
    bool dup = false;
    for (const scalar::Format& g : seen) dup |= std::memcmp(&g, &f, sizeof f) == 0;
    if (dup) continue;
    seen.push_back(f);
    double bad = 0;
    const uint64_t n = gpu::detail::verify_fast_quantizer(f, uint64_t{1} << 28, seed, &bad);
    EXPECT_EQ(n, 0u) << e.name << ": first mismatch at " << bad << " (seed " << seed << ")";
  }
  EXPECT_GE(seen.size(), 8u);
  // TCFP-12's residual grid (int4), which the TCFP kernel's float path codes with it.
  const scalar::Format int4 = NumberSpec::parse("int4").format();
  ASSERT_TRUE(gpu::detail::fast_quantizer_applies(int4));
  double bad = 0;
  EXPECT_EQ(gpu::detail::verify_fast_quantizer(int4, uint64_t{1} << 24, seed, &bad), 0u)
      << "int4: first mismatch at " << bad << " (seed " << seed << ")";
}

TEST(GpuCast, Bfloat16CodesEqualSharedQuantizerExhaustively) {
  CS_REQUIRE_GPU();
  uint32_t bad = 0;
  uint64_t checked = 0;
  EXPECT_EQ(gpu::detail::verify_bf16_codes(&bad, &checked), 0u)
      << "first mismatch at float bits " << bad;
  // Every float32 pattern but the 2^24 with an all-ones exponent (Inf and NaN).
  EXPECT_EQ(checked, (uint64_t{1} << 32) - (uint64_t{1} << 24));
  const scalar::Format f = detail::make_plan({64, 64}, DataType::parse("bfloat16"), {}).data;
  EXPECT_NE(gpu::detail::static_grid(f), 0) << "bfloat16 misses its fast path";
}

// The lean kernel codes bfloat16 input two values at a time for MXFP4, MXFP6 (e2m3) and NVFP4;
// those codes against the shared quantizer (MX) and the float threshold codes (NVFP4) on every
// finite bfloat16.
TEST(GpuCast, Bfloat16PairCodesEqualFloatCodesExhaustively) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t bad = 0, checked = 0;
  EXPECT_EQ(gpu::detail::verify_bf16_pair_codes(seed, &bad, &checked), 0u)
      << "first mismatch at work item " << bad << " (seed " << seed << ")";
  // Per bfloat16 pair: the 252 shifts each of e2m1's, e2m3's and int8's lines take (2^-shift
  // times their multipliers normal), and 126 e4m3 tile scales under 14 tensor scales.
  EXPECT_EQ(checked, uint64_t{65536} * (252 + 252 + 252 + 126 * 14));
}

TEST(GpuTcfp, FloatScaleAndResidualCodesEqualSharedExhaustively) {
  CS_REQUIRE_GPU();
  for (const char* grid : {"e4m3fn", "int4"}) {
    uint32_t bad = 0;
    EXPECT_EQ(gpu::detail::verify_tcfp_fast_paths(NumberSpec::parse(grid).format(), &bad), 0u)
        << grid << ": first mismatch at float bits " << bad;
  }
}

}  // namespace
}  // namespace castscope::gputest
