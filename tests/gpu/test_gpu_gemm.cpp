// cuBLASLt GEMMs: each kind runs and lands within the error its number format allows.
#include "castscope/matmul.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

TEST(GpuGemm, EveryKindWithinItsErrorBound) {
  std::string why;
  if (!gemm_available(&why)) GTEST_SKIP() << "GEMMs unavailable: " << why;
  const uint64_t seed = run_seed();
  GemmOptions o;
  o.m = 256, o.n = 384, o.k = 512;
  o.seed = seed;
  o.warmup = 1;
  o.iters = 3;
  struct Bound {
    GemmKind kind;
    double lo, hi;  // a zero error would mean the check compared nothing
  } bounds[] = {{GemmKind::BF16, 1e-4, 8e-3},
                {GemmKind::FP8, 5e-3, 8e-2},
                {GemmKind::FP8Block, 5e-3, 8e-2},
                {GemmKind::TCFP12, 1e-4, 3e-2},
                {GemmKind::TCFP16, 1e-6, 8e-3}};
  double fp8 = 0, tcfp16 = 0;
  for (const Bound& b : bounds) {
    GemmResult r;
    try {
      r = run_gemm(b.kind, o);
    } catch (const Error& e) {
      if (b.kind == GemmKind::FP8Block) {
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
    std::printf("%-10s rel.err %.3e  %s\n", to_string(b.kind), r.rel_error, r.note.c_str());
  }
  EXPECT_LT(tcfp16, fp8 / 4) << "the two TCFP-16 terms must be far more accurate than one FP8 term";
}

TEST(GpuGemm, BadSizesAreErrors) {
  std::string why;
  if (!gemm_available(&why)) GTEST_SKIP() << "GEMMs unavailable: " << why;
  GemmOptions o;
  o.m = 100, o.n = 64, o.k = 64;
  EXPECT_THROW(run_gemm(GemmKind::FP8, o), Error);
  o.m = 64, o.k = 0;
  EXPECT_THROW(run_gemm(GemmKind::BF16, o), Error);
}

}  // namespace
}  // namespace castscope::gputest
