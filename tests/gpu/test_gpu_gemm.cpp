// cuBLASLt GEMMs: each kind runs and lands within the error its number format allows.
#include "castscope/matmul.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

int compute_capability() {
  return gemm_compute_capability();
}

// Every test here needs cuBLASLt's GEMMs, and says why where they cannot run.
class GpuGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gemm_available(&why)) GTEST_SKIP() << "GEMMs unavailable: " << why;
  }

  // An m x k by k x n product of the run's seed: one warm-up, then `iters` timed runs.
  static GemmOptions sized(int m, int n, int k, int iters) {
    GemmOptions o;
    o.m = m, o.n = n, o.k = k;
    o.seed = run_seed();
    o.warmup = 1;
    o.iters = iters;
    return o;
  }
};

TEST_F(GpuGemm, EveryKindWithinItsErrorBound) {
  const uint64_t seed = run_seed();
  GemmOptions o = sized(256, 384, 512, 3);
  struct Bound {
    GemmKind kind;
    double lo, hi;  // a zero error would mean the check compared nothing
  } bounds[] = {{GemmKind::BF16, 1e-4, 8e-3},      {GemmKind::FP8, 5e-3, 8e-2},
                {GemmKind::FP8Block, 5e-3, 8e-2},  {GemmKind::TCFP12, 1e-4, 3e-2},
                {GemmKind::TCFP16, 1e-6, 8e-3},    {GemmKind::TCFP12Weights, 5e-3, 8e-2},
                {GemmKind::FP8Channel, 5e-3, 8e-2}};
  double fp8 = 0, tcfp16 = 0, tcfp12w = 0;
  for (const Bound& b : bounds) {
    GemmResult r;
    try {
      r = run_gemm(b.kind, o);
    } catch (const Error& e) {
      if (b.kind == GemmKind::FP8Block && compute_capability() / 10 != 9) {
        std::printf("fp8-block unavailable here: %s\n", e.what());
        continue;
      }
      FAIL() << to_string(b.kind) << ": " << e.what();
    }
    EXPECT_GT(r.ms, 0) << to_string(b.kind);
    EXPECT_GT(r.rel_error, b.lo) << to_string(b.kind) << " seed " << seed;
    EXPECT_LT(r.rel_error, b.hi) << to_string(b.kind) << " seed " << seed;
    if (b.kind == GemmKind::FP8) fp8 = r.rel_error;
    if (b.kind == GemmKind::TCFP16) tcfp16 = r.rel_error;
    if (b.kind == GemmKind::TCFP12Weights) tcfp12w = r.rel_error;
    std::printf("%-10s rel.err %.3e  %s\n", to_string(b.kind), r.rel_error, r.note.c_str());
  }
  EXPECT_LT(tcfp16, fp8 / 4) << "the two TCFP-16 terms must be far more accurate than one FP8 term";
  // With TCFP-12 weights only the activations' e4m3 rounding is left of the two FP8 operands'.
  EXPECT_LT(tcfp12w, fp8 * 0.85) << "seed " << seed;
}

// Per-channel FP8 (cuBLASLt's outer-vector scales) against the exact product of its operands, and
// the TCFP-12 weight GEMM over 2k at a shape whose k is not a power of two, with both outputs.
TEST_F(GpuGemm, PerChannelFp8AndTcfp12WeightsMatchTheirProducts) {
  const uint64_t seed = run_seed();
  GemmOptions o = sized(272, 400, 608, 2);
  const GemmResult c = run_gemm(GemmKind::FP8Channel, o);
  std::printf("fp8-channel: product rel.err %.3e, rel.err %.3e  %s\n", c.product_rel_error,
              c.rel_error, c.note.c_str());
  // A scale applied to the wrong rows or columns puts this near 1.
  EXPECT_LT(c.product_rel_error, 1e-2) << "seed " << seed;
  EXPECT_GT(c.rel_error, 5e-3) << "seed " << seed;
  for (bool bf16_out : {false, true}) {
    o.bf16_output = bf16_out;
    o.autotune = bf16_out ? 4 : 0;
    const GemmResult w = run_gemm(GemmKind::TCFP12Weights, o);
    std::printf("tcfp12-w %s: rel.err %.3e  %s\n", bf16_out ? "bf16" : "fp32", w.rel_error,
                w.note.c_str());
    EXPECT_GT(w.rel_error, 5e-3) << "seed " << seed;
    EXPECT_LT(w.rel_error, 5e-2) << "seed " << seed;
  }
}

// The GEMM against the exact product of its operands as the GPU multiplied them (decoded codes
// times their scales, fp64 on the CPU). k = 640 gives 5 K blocks, so the 128x128 scale rows are
// padded to 8; m != n and n = 3 x 128 catch a transposed or unpadded scale layout, which would
// put the error near 1.
TEST_F(GpuGemm, BlockScaledFp8MatchesCpuProductOfItsOperands) {
  const uint64_t seed = run_seed();
  GemmOptions o = sized(256, 384, 640, 2);
  for (bool bf16_out : {false, true}) {
    o.bf16_output = bf16_out;
    GemmResult r;
    try {
      r = run_gemm(GemmKind::FP8Block, o);
    } catch (const Error& e) {
      // cuBLASLt has the 1x128 / 128x128 modes on Hopper only (not on Ada or Blackwell).
      if (compute_capability() / 10 == 9) FAIL() << "fp8-block on Hopper: " << e.what();
      GTEST_SKIP() << "fp8-block unavailable here: " << e.what();
    }
    SCOPED_TRACE(std::string(bf16_out ? "bf16" : "fp32") + " output, seed " + std::to_string(seed));
    std::printf("fp8-block %s output: product rel.err %.3e, rel.err %.3e  %s\n",
                bf16_out ? "bf16" : "fp32", r.product_rel_error, r.rel_error, r.note.c_str());
    // Hopper's FP8 tensor cores add the products of each 128-deep K block with about 14
    // significant bits before cuBLASLt promotes the block sum to fp32: measured 1.26e-4 at
    // 4096^3 and 8192^3 (docs/performance.md). A wrong scale layout gives errors near 1.
    if (!bf16_out) EXPECT_LT(r.product_rel_error, 1e-3);
    // bf16 output: the output rounding (2^-9 relative at most) dominates, and it cannot vanish.
    if (bf16_out) {
      EXPECT_GT(r.product_rel_error, 1e-4);
      EXPECT_LT(r.product_rel_error, 4e-3);
    }
    EXPECT_GT(r.rel_error, 5e-3);  // e4m3 quantization of N(0,1) operands
    EXPECT_LT(r.rel_error, 8e-2);
  }
  // The unscaled and per-tensor GEMMs against their own operands too.
  o.bf16_output = false;
  EXPECT_LT(run_gemm(GemmKind::BF16, o).product_rel_error, 1e-5);
  EXPECT_LT(run_gemm(GemmKind::FP8, o).product_rel_error, 1e-2);
}

TEST_F(GpuGemm, BlackwellBlockScaledModesSayTheyNeedSm100) {
  if (compute_capability() >= 100) GTEST_SKIP() << "an sm_100 GPU";
  GemmOptions o;
  o.m = o.n = o.k = 256;
  for (GemmKind kind : {GemmKind::MXFP8Block, GemmKind::NVFP4Block}) {
    try {
      run_gemm(kind, o);
      ADD_FAILURE() << to_string(kind) << " ran on a GPU older than sm_100";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("needs an sm_100"), std::string::npos) << e.what();
    }
  }
}

TEST_F(GpuGemm, BadSizesAreErrors) {
  GemmOptions o;
  o.m = 100, o.n = 64, o.k = 64;
  EXPECT_THROW(run_gemm(GemmKind::FP8, o), Error);
  o.m = 64, o.k = 0;
  EXPECT_THROW(run_gemm(GemmKind::BF16, o), Error);
}

}  // namespace
}  // namespace castscope::gputest
