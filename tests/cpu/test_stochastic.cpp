// Stochastic rounding (decision 2): unbiased, reproducible, and a function of (seed, element
// index) only.
#include "helpers.hpp"

using namespace cputest;

namespace {

CastOptions sr(uint64_t seed, int threads = 0) {
  CastOptions o = cpu_opts();
  o.round = parse_round("stochastic");
  o.seed = seed;
  o.threads = threads;
  return o;
}

// A constant between two neighbours lo < x < hi rounds up with probability (x - lo) / (hi - lo);
// the mean of N draws must be within 5 standard errors of x, while nearest-even is far off.
TEST(Stochastic, UnbiasedOnAConstant) {
  const uint64_t seed = fresh_seed();
  struct Case {
    const char* dtype;
    float x, lo, hi;
  };
  const Case cases[] = {{"e4m3fn", 1.0375f, 1.0f, 1.125f},
                        {"e2m1fnuz", 2.2f, 2.0f, 3.0f},
                        {"e5m2", -0.0009f, -0.0009765625f, -0.0008544921875f},
                        {"bfloat16", 1.001f, 1.0f, 1.0078125f}};
  const int64_t n = 200000;
  for (const Case& c : cases) {
    const std::vector<float> x(n, c.x);
    const std::vector<float> q =
        to_vec(cast(f32(x, {n}), DataType::parse(c.dtype), sr(seed)).values);
    double sum = 0;
    int64_t up = 0;
    for (float v : q) {
      ASSERT_TRUE(v == c.lo || v == c.hi) << c.dtype << " seed=" << seed << " got " << v;
      sum += v;
      up += v == c.hi;
    }
    const double p = (double(c.x) - c.lo) / (double(c.hi) - c.lo);
    const double se = (double(c.hi) - c.lo) * std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(sum / n, double(c.x), 5 * se) << c.dtype << " seed=" << seed << " up " << up;
    // Nearest-even is biased by more than the tolerance: the test can tell.
    const float even =
        to_vec(cast(f32({c.x}, {1}), DataType::parse(c.dtype), cpu_opts()).values)[0];
    EXPECT_GT(std::fabs(double(even) - c.x), 5 * se) << c.dtype;
  }
}

// Random data through a scaled datatype: the mean error over many elements tends to zero within
// 5 standard errors estimated from the per-element error spread.
TEST(Stochastic, UnbiasedScaled) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  // Values in [0.52, 0.54] with tile absmax 1: every format here has a grid point at 0.5 and none
  // up to 0.54, so nearest rounding is clearly biased while stochastic rounding must not be.
  std::uniform_real_distribution<float> u(0.52f, 0.54f);
  for (const char* name : {"mxfp4e2", "mxint4", "nvfp4", "mxfp6e2"}) {
    const int64_t n = 64 * 4096;
    std::vector<float> x(n);
    for (auto& v : x) v = u(rng);
    // Fixes every tile's scale (16 is the smallest tile here, nvfp4's). With a tile absmax from
    // the data instead, an nvfp4 scale rounded to e4m3 lets the top values clip, which no
    // rounding mode can make unbiased.
    for (int64_t t = 0; t < n; t += 16) x[t] = 1.0f;
    const std::vector<float> q =
        to_vec(cast(f32(x, {64, 4096}), DataType::parse(name), sr(seed)).values);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = double(q[i]) - x[i];
      s += e;
      s2 += e * e;
    }
    const double mean = s / n, se = std::sqrt((s2 / n - mean * mean) / n);
    EXPECT_LT(std::fabs(mean), 5 * se) << name << " seed=" << seed;
    // Nearest rounding of the same data is biased (the grid is coarse and the data skewed).
    const std::vector<float> qe =
        to_vec(cast(f32(x, {64, 4096}), DataType::parse(name), cpu_opts()).values);
    double se_sum = 0;
    for (int64_t i = 0; i < n; ++i) se_sum += double(qe[i]) - x[i];
    EXPECT_GT(std::fabs(se_sum / n), 5 * se) << name << " nearest looks unbiased too";
  }
}

TEST(Stochastic, ReproducibleAndSeedDependent) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(64 * 1024);
  for (auto& v : x) v = normal(rng);
  x[0] = 8.0f;  // the tensor's absmax lies in the head, so a tensor scale is the same for both
  for (const char* name : {"e4m3fn", "mxfp4e2", "mxint8", "nvfp4", "int8_sc", "e2m1", "bfloat16"}) {
    const DataType d = DataType::parse(name);
    const Tensor t = f32(x, {64, 1024});
    const Tensor a = cast(t, d, sr(seed)).values;
    const Tensor b = cast(t, d, sr(seed)).values;
    EXPECT_EQ(first_diff(a, b), -1) << name << " seed=" << seed;
    const Tensor c = cast(t, d, sr(seed + 1)).values;
    EXPECT_NE(first_diff(a, c), -1) << name << " seeds " << seed << " and " << seed + 1;
    // Thread count does not matter.
    const Tensor t1 = cast(t, d, sr(seed, 1)).values;
    const Tensor t2 = cast(t, d, sr(seed, 2)).values;
    EXPECT_EQ(first_diff(t1, a), -1) << name << " threads=1 seed=" << seed;
    EXPECT_EQ(first_diff(t2, a), -1) << name << " threads=2 seed=" << seed;
    // Only the element index matters: the first rows cast alone give the same bits.
    const std::vector<float> head(x.begin(), x.begin() + 16 * 1024);
    const std::vector<float> h = to_vec(cast(f32(head, {16, 1024}), d, sr(seed)).values);
    const std::vector<float> av = to_vec(a);
    for (size_t i = 0; i < h.size(); ++i)
      ASSERT_TRUE(same(h[i], av[i])) << name << " i=" << i << " seed=" << seed;
  }
}

// Each stochastic result is one of the two neighbours that bracket the value.
TEST(Stochastic, PicksANeighbour) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> x = mixed(4096, rng);
  for (const char* name : {"e4m3fn", "e5m2", "e2m1fnuz", "e3m2"}) {
    const DataType d = DataType::parse(name);
    const std::vector<float> q = to_vec(cast(f32(x, {4096}), d, sr(seed)).values);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i])) continue;
      // The neighbours of x: the representable values nearest below and above.
      const NumberSpec& n = d.number();
      const double a = std::fabs(double(x[i]));
      int k;
      std::frexp(a, &k);
      const double ulp = std::ldexp(1.0, std::max(k - 1, n.emin()) - n.mbits());
      double lo = std::floor(a / ulp) * ulp, hi = std::ceil(a / ulp) * ulp;
      lo = std::min(lo, n.max());
      hi = std::min(hi, n.max());
      const double m = std::fabs(double(q[i]));
      ASSERT_TRUE(m == lo || m == hi)
          << name << " x=" << x[i] << " got " << q[i] << " seed=" << seed;
    }
  }
}

}  // namespace
