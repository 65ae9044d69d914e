// TCFP datatypes (tcfp.md) have no closed-form oracle (the 3-sigma scale is a heuristic), so they
// are checked by their documented properties: the quality table on N(0, 1) data, the residual
// range, and the error feedback that makes repeated TCFP-8 casts unbiased.
#include "castscope/metrics.hpp"
#include "castscope/tcfp.hpp"
#include "helpers.hpp"

using namespace cputest;

namespace {

std::vector<float> gaussian(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// tcfp.md's quality table (N(0, 1), 4096 x 4096): SNR 31.4 / 46.0 / 64.1 dB for TCFP-8 / 12 / 16.
// A 1024 x 1024 sample estimates the same expectations to well within 1 dB.
TEST(Tcfp, QualityTable) {
  const uint64_t seed = fresh_seed();
  const Tensor x = f32(gaussian(1024 * 1024, seed), {1024, 1024});
  struct Row {
    const char* name;
    double snr;
  };
  double last = 0;
  for (const Row& r : {Row{"tcfp8", 31.4}, Row{"tcfp12", 46.0}, Row{"tcfp16", 64.1}}) {
    const CastResult c = cast(x, DataType::parse(r.name), cpu_opts());
    const Stats s = compute_stats(x, c.values, c.counts.clipped);
    EXPECT_NEAR(s.snr_db, r.snr, 1.5) << r.name << " seed=" << seed;
    EXPECT_GT(s.snr_db, last) << r.name;
    EXPECT_EQ(s.count, x.numel());
    last = s.snr_db;
  }
  // Naive FP8 for comparison (31.5 dB in the table).
  const CastResult f8 = cast(x, DataType::parse("e4m3fn"), cpu_opts());
  EXPECT_NEAR(compute_stats(x, f8.values).snr_db, 31.5, 1.5);
}

// TCFP-12 residuals are 4-bit signed values in [-7, 7] (15 uniform levels).
TEST(Tcfp, ResidualRange) {
  const uint64_t seed = fresh_seed();
  const Tensor x = f32(gaussian(64 * 256, seed), {64, 256});
  const CastResult a = cast(x, DataType::parse("tcfp12"), cpu_opts(CastMode::Actual));
  ASSERT_TRUE(static_cast<bool>(a.residual));
  ASSERT_EQ(a.residual.numel(), x.numel());
  const std::vector<float> r = to_vec(a.residual.to_f32());
  int nonzero = 0;
  for (float v : r) {
    ASSERT_GE(v, -7.0f);
    ASSERT_LE(v, 7.0f);
    nonzero += v != 0;
  }
  EXPECT_GT(nonzero, x.numel() / 2) << "residual carries little";
}

// Error feedback: the running mean of repeated TCFP-8 casts of the same tensor converges to it,
// while plain casts keep their bias.
TEST(Tcfp, ErrorFeedbackIsUnbiased) {
  const uint64_t seed = fresh_seed();
  const int64_t n = 4096;
  std::vector<float> xv = gaussian(n, seed);
  const Tensor x = f32(xv, {32, 128});
  tcfp::ErrorFeedback fb;
  const DataType d = DataType::parse("tcfp8");
  std::vector<double> sum(n, 0.0);
  const int steps = 64;
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> q = to_vec(fb.step("w", x, d, cpu_opts()));
    for (int64_t i = 0; i < n; ++i) sum[i] += q[i];
  }
  EXPECT_TRUE(fb.has("w"));
  const std::vector<float> plain = to_vec(cast(x, d, cpu_opts()).values);
  double fb_err = 0, plain_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    fb_err += std::fabs(sum[i] / steps - xv[i]);
    plain_err += std::fabs(double(plain[i]) - xv[i]);
  }
  EXPECT_LT(fb_err, plain_err / 8) << "seed=" << seed;
  fb.reset("w");
  EXPECT_FALSE(fb.has("w"));
}

}  // namespace
