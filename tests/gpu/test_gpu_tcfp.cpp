// The lean TCFP kernel against the CPU engine on blocks chosen to reach each of its paths: the
// float statistics of TCFP-8's NormalFloat-aware scale and their exact fallback (blocks whose
// 3 sigma lies at or next to a scale boundary, constant blocks), the double residual of extreme
// scales, NaN / Inf, zeros and float subnormals.
#include <algorithm>
#include <cmath>

#include "gpu_test_util.hpp"

#include "castscope/datatype.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"
#include "families/tcfp/tcfp_block.hpp"

namespace castscope::gputest {
namespace {

namespace tcb = castscope::detail::tcfp;

constexpr int kB = tcb::kBlock;
constexpr int kKinds = 9;
constexpr int kNearBoundary = 1;

// Rounds v to the input dtype (float32, or bfloat16 when bf16).
double round_to(double v, bool bf16) {
  const float f = static_cast<float>(v);
  return bf16 ? static_cast<double>(bf16_to_float(float_to_bf16(f))) : static_cast<double>(f);
}

// The next representable magnitude below a positive v.
double step_down(double v, bool bf16) {
  if (!bf16) return std::nextafter(static_cast<float>(v), 0.0f);
  return bf16_to_float(static_cast<uint16_t>(float_to_bf16(static_cast<float>(v)) - 1));
}

// The scale boundary of TCFP-8's target nearest above t: 1.75 * 2^k.
double boundary_above(double t) {
  return 1.75 * std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(t / 1.75))));
}

// 16 pairs +-a_j whose sum of squares approaches 32 * (target / 3)^2: 3 sigma of the block is
// then the target to about 2^-40 (the greedy leaves a remainder that shrinks by 2^-7 or more per
// pair), and the mean is exactly zero.
void near_boundary_block(double* b, double target, bool bf16, std::mt19937_64& rng) {
  double rem = 16.0 * (target / 3.0) * (target / 3.0);  // per pair: a^2
  double a[kB / 2];
  for (int j = 0; j < kB / 2; ++j) {
    double v = rem > 0 ? round_to(std::sqrt(rem), bf16) : 0.0;
    while (j + 1 < kB / 2 && v * v > rem && v > 0) v = step_down(v, bf16);
    a[j] = v;
    rem -= v * v;
  }
  for (int j = 0; j < kB / 2; ++j) {
    const double s = rng() & 1 ? 1.0 : -1.0;
    b[2 * j] = s * a[j];
    b[2 * j + 1] = -s * a[j];
  }
  std::shuffle(b, b + kB, rng);
}

// One block of the given kind, values already representable in the input dtype.
void make_block(int kind, double* b, bool bf16, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_int_distribution<int> ed(-20, 20), tiny(-149, -120), huge(60, 127);
  const double sgn = rng() & 1 ? 1.0 : -1.0;
  switch (kind) {
    case 0: {  // Gaussian, a random binade, a mean offset of up to 2^12 sigma
      const double s = std::ldexp(1.0, ed(rng)), m = nd(rng) * std::ldexp(s, rng() % 13);
      for (int i = 0; i < kB; ++i) b[i] = round_to(m + s * nd(rng), bf16);
      break;
    }
    case kNearBoundary: {
      // At the boundary, or 2^-22 to 2^-14 (relative) to either side of it: the float bounds'
      // margin lies in between.
      const double t = 1.75 * std::ldexp(1.0, ed(rng));
      const double off =
          rng() % 3 == 0 ? 0.0 : sgn * std::ldexp(1.0, -22 + static_cast<int>(rng() % 9));
      near_boundary_block(b, t * (1.0 + off), bf16, rng);
      break;
    }
    case 2:  // constant: 3 sigma is zero, the CPU takes the absmax
      std::fill(b, b + kB, round_to(sgn * std::ldexp(1.0 + (rng() % 256) / 256.0, ed(rng)), bf16));
      break;
    case 3:  // zeros of both signs
      for (int i = 0; i < kB; ++i) b[i] = rng() & 1 ? 0.0 : -0.0;
      break;
    case 4:  // float subnormals and the smallest normals: the scale code clamps at 0
      for (int i = 0; i < kB; ++i) b[i] = round_to(nd(rng) * std::ldexp(1.0, tiny(rng)), bf16);
      break;
    case 5: {  // 2^60 to float's top binade: the exact statistics, the double residual
      const int e = huge(rng);
      for (int i = 0; i < kB; ++i)
        b[i] = round_to(std::clamp(nd(rng), -1.9, 1.9) * std::ldexp(1.0, e), bf16);
      break;
    }
    case 6:  // Gaussian with one NaN or Inf
      for (int i = 0; i < kB; ++i) b[i] = round_to(nd(rng), bf16);
      b[rng() % kB] = rng() % 3 == 0 ? std::nan("") : sgn * HUGE_VAL;
      break;
    case 7:  // one outlier over small noise: the target is 3 sigma, far under the absmax
      for (int i = 0; i < kB; ++i) b[i] = round_to(1e-3 * nd(rng), bf16);
      b[rng() % kB] = round_to(sgn * 50.0, bf16);
      break;
    default: {  // a few ulps of spread around a large mean: cancellation in the mean
      const double m = std::ldexp(1.0 + (rng() % 128) / 128.0, ed(rng));
      const double ulp = std::ldexp(m, bf16 ? -7 : -23);
      for (int i = 0; i < kB; ++i)
        b[i] = round_to(sgn * (m + ulp * static_cast<double>(rng() % 5)), bf16);
    }
  }
}

Tensor hard_blocks(int64_t rows, int64_t cols, bool bf16, uint64_t seed, int* near) {
  std::mt19937_64 rng(seed);
  Tensor t = Tensor::empty(bf16 ? DType::BF16 : DType::F32, {rows, cols});
  double b[kB];
  *near = 0;
  for (int64_t blk = 0; blk < rows * cols / kB; ++blk) {
    const int kind = static_cast<int>(rng() % kKinds);
    make_block(kind, b, bf16, rng);
    if (kind == kNearBoundary) {
      double absmax = 0;
      for (double v : b) absmax = std::max(absmax, std::fabs(v));
      const double t = tcb::main_target(b, kB, absmax, true);
      const double edge = boundary_above(t);
      const double below = edge / 2;
      if (std::min(std::fabs(t / edge - 1), std::fabs(t / below - 1)) < 0x1p-19) ++*near;
    }
    for (int i = 0; i < kB; ++i) {
      const int64_t e = blk * kB + i;
      if (bf16)
        t.mutable_ptr<uint16_t>()[e] = float_to_bf16(static_cast<float>(b[i]));
      else
        t.mutable_ptr<float>()[e] = static_cast<float>(b[i]);
    }
  }
  return t;
}

TEST(GpuTcfp, LeanKernelEqualsCpuOnHardBlocks) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 0;
  for (bool bf16 : {false, true})
    for (const Shape& shape : {Shape{1024, 256}, Shape{3, 96}}) {
      int near = 0;
      const Tensor x = hard_blocks(shape[0], shape[1], bf16, seed + ++k, &near);
      // About a ninth of the blocks are near-boundary ones; most sit within 2^-19 of a boundary.
      if (shape[0] > 100) EXPECT_GT(near, shape[0] * shape[1] / kB / kKinds / 4);
      for (const char* name : {"tcfp8", "tcfp12", "tcfp16"})
        for (bool nf : {true, false}) {
          const DataType d = DataType::parse(name);
          CastOptions o;
          o.mode = CastMode::Compress;
          o.tcfp_nf_aware = nf;
          EXPECT_EQ(gpu::detail::cast_kernel(x, d, o), "tcfp-lean") << name;
          CastResult c = cpu_cast(x, d, o);
          CastResult g = cuda::cast(x, d, o);
          EXPECT_EQ(result_diff(c, g), "")
              << name << (nf ? "" : " (absmax scale)") << " input " << dtype_name(x.dtype()) << " "
              << shape_str(shape) << " (seed " << seed << ", input seed " << seed + k << ")";
        }
    }
}

}  // namespace
}  // namespace castscope::gputest
