// Shared helpers of the GPU tests: skip without a device, random inputs with special values, and
// byte-exact comparison of cast results.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"
#include "castscope/modelmap.hpp"
#include "test_seed.hpp"

namespace castscope::gputest {

inline bool gpu_or_skip_reason(std::string& reason) {
  return cuda::available(&reason);
}

#define CS_REQUIRE_GPU()                                 \
  do {                                                   \
    std::string why_;                                    \
    if (!::castscope::gputest::gpu_or_skip_reason(why_)) \
      GTEST_SKIP() << "no usable GPU: " << why_;         \
  } while (0)

// A fresh seed per process, printed by every failure that uses it.
inline uint64_t run_seed() {
  static const uint64_t s = castscope::test::test_seed();
  return s;
}

// Normal values over a wide exponent range, with NaN, +-Inf, +-0, float subnormals, exact ties
// (odd multiples of powers of two) and values at the datatype's max and midmax sprinkled in.
inline Tensor random_input(const Shape& shape, uint64_t seed, double max_value, double midmax) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_int_distribution<int> ed(-12, 12), pick(0, 999), small(0, 31);
  Tensor t = Tensor::empty(DType::F32, shape);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = nd(rng) * std::ldexp(1.0, ed(rng) / 4);
    const int k = pick(rng);
    if (k < 3)
      v = std::numeric_limits<double>::quiet_NaN();
    else if (k < 5)
      v = (k == 3 ? 1 : -1) * std::numeric_limits<double>::infinity();
    else if (k < 15)
      v = (k & 1 ? -1 : 1) * std::ldexp(2.0 * small(rng) + 1, ed(rng) - 4);  // ties on many grids
    else if (k < 20)
      v = (k & 1 ? -1 : 1) * std::ldexp(1.0 + small(rng), -140);  // float subnormals
    else if (k < 25)
      v = (k & 1 ? -1 : 1) * max_value;
    else if (k < 30)
      v = (k & 1 ? -1 : 1) * midmax;
    else if (k < 33)
      v = k & 1 ? -0.0 : 0.0;
    else if (k < 36)
      v = (k & 1 ? -1 : 1) * std::ldexp(max_value, 3);  // overflow
    p[i] = static_cast<float>(v);
  }
  return t;
}

inline std::string tensor_diff(const char* what, const Tensor& a, const Tensor& b) {
  if (!a && !b) return "";
  if (!a || !b) return std::string(what) + ": present on one backend only";
  if (a.dtype() != b.dtype())
    return std::string(what) + ": dtype " + dtype_name(a.dtype()) + " vs " + dtype_name(b.dtype());
  if (a.shape() != b.shape())
    return std::string(what) + ": shape " + shape_str(a.shape()) + " vs " + shape_str(b.shape());
  const size_t n = a.nbytes(), es = dtype_size(a.dtype());
  const uint8_t* x = static_cast<const uint8_t*>(a.data());
  const uint8_t* y = static_cast<const uint8_t*>(b.data());
  for (size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) {
      std::string s = std::string(what) + ": first difference at element " + std::to_string(i / es);
      if (a.dtype() == DType::F32) {
        float fa, fb;
        std::memcpy(&fa, x + (i / es) * 4, 4);
        std::memcpy(&fb, y + (i / es) * 4, 4);
        s += " (cpu " + std::to_string(fa) + ", gpu " + std::to_string(fb) + ")";
      } else {
        s += " (byte cpu " + std::to_string(x[i]) + ", gpu " + std::to_string(y[i]) + ")";
      }
      return s;
    }
  return "";
}

// "" when the two results hold the same bytes in every tensor and the same counts.
inline std::string result_diff(const CastResult& cpu, const CastResult& gpu) {
  std::string d;
  if (cpu.mode != gpu.mode) return "mode differs";
  for (auto [name, a, b] : {std::tuple{"values", &cpu.values, &gpu.values},
                            {"codes", &cpu.codes, &gpu.codes},
                            {"scale", &cpu.scale, &gpu.scale},
                            {"zero", &cpu.zero, &gpu.zero},
                            {"tenscale", &cpu.tenscale, &gpu.tenscale},
                            {"meta", &cpu.meta, &gpu.meta},
                            {"mask", &cpu.mask, &gpu.mask},
                            {"residual", &cpu.residual, &gpu.residual},
                            {"residual_scale", &cpu.residual_scale, &gpu.residual_scale}}) {
    d = tensor_diff(name, *a, *b);
    if (!d.empty()) return d;
  }
  if (cpu.counts.clipped != gpu.counts.clipped)
    return "clipped " + std::to_string(cpu.counts.clipped) + " vs " +
           std::to_string(gpu.counts.clipped);
  if (cpu.counts.nonfinite != gpu.counts.nonfinite)
    return "nonfinite " + std::to_string(cpu.counts.nonfinite) + " vs " +
           std::to_string(gpu.counts.nonfinite);
  if (cpu.counts.pruned != gpu.counts.pruned)
    return "pruned " + std::to_string(cpu.counts.pruned) + " vs " +
           std::to_string(gpu.counts.pruned);
  return "";
}

inline CastResult cpu_cast(const Tensor& x, const DataType& d, CastOptions o) {
  o.device = Device::CPU;
  return cast(x, d, o);
}

// A sum computed on the device against the host's: equal up to summation order, infinities
// exactly.
inline void expect_close(double cpu, double gpu, const std::string& what) {
  if (std::isinf(cpu) || std::isinf(gpu)) {
    EXPECT_EQ(cpu, gpu) << what;
    return;
  }
  EXPECT_NEAR(gpu, cpu, 1e-9 * std::max(1.0, std::fabs(cpu))) << what;
}

// Statistics: counts and the largest error exactly, sums up to summation order.
inline void expect_same_stats(const Stats& c, const Stats& g, const std::string& tag) {
  EXPECT_EQ(std::tie(c.count, c.nonfinite_in, c.nonfinite_out, c.zeros_out, c.clipped),
            std::tie(g.count, g.nonfinite_in, g.nonfinite_out, g.zeros_out, g.clipped))
      << tag << ": (count, nonfinite_in, nonfinite_out, zeros_out, clipped)";
  EXPECT_EQ(c.max_abs_err, g.max_abs_err) << tag;
  expect_close(c.mse, g.mse, "mse " + tag);
  expect_close(c.snr_db, g.snr_db, "snr " + tag);
  expect_close(c.mean_err, g.mean_err, "bias " + tag);
  expect_close(c.signal_power, g.signal_power, "power " + tag);
}

// Histograms are counts: equal bin for bin, with the same range (lo, hi) and the same tallies
// outside it (below, above, nonfinite, zeros).
inline void expect_hist(const Histogram& c, const Histogram& g, const std::string& what) {
  EXPECT_EQ(c.counts, g.counts) << what;
  EXPECT_EQ(std::tie(c.lo, c.hi), std::tie(g.lo, g.hi)) << what << ": range (lo, hi)";
  EXPECT_EQ(std::tie(c.below, c.above, c.nonfinite, c.zeros),
            std::tie(g.below, g.above, g.nonfinite, g.zeros))
      << what << ": (below, above, nonfinite, zeros)";
}

// A model map swept on the device against the CPU's sweep, cell by cell: errors, counts and the
// largest error exactly; the SNR up to summation order (sums of squares in another order, see
// docs/performance.md, "Model map sweep": 1e-9 relative covers it, a wrong cell does not). An
// exact cast has an infinite SNR on both sides.
inline void expect_same_map(const ModelMap& cpu, const ModelMap& gpu,
                            const std::vector<std::string>& dtypes, uint64_t seed) {
  ASSERT_EQ(gpu.rows.size(), cpu.rows.size());
  for (size_t i = 0; i < gpu.rows.size(); ++i) {
    ASSERT_EQ(gpu.rows[i].name, cpu.rows[i].name);
    for (size_t d = 0; d < dtypes.size(); ++d) {
      const MapCell &a = cpu.rows[i].cells[d], &b = gpu.rows[i].cells[d];
      const std::string where =
          "seed " + std::to_string(seed) + " " + cpu.rows[i].name + " " + dtypes[d];
      EXPECT_EQ(a.error, b.error) << where;
      EXPECT_EQ(a.stats.count, b.stats.count) << where;
      EXPECT_EQ(a.stats.clipped, b.stats.clipped) << where;
      EXPECT_EQ(a.stats.nonfinite_in, b.stats.nonfinite_in) << where;
      EXPECT_EQ(a.stats.nonfinite_out, b.stats.nonfinite_out) << where;
      EXPECT_EQ(a.stats.max_abs_err, b.stats.max_abs_err) << where;
      if (a.stats.snr_db != b.stats.snr_db)
        EXPECT_NEAR(a.stats.snr_db, b.stats.snr_db, 1e-8 * std::fabs(a.stats.snr_db) + 1e-9)
            << where;
    }
  }
}

// A tiled datatype cast along an axis of a shape: the cases of the tests that run such casts on
// both backends.
struct AxisCase {
  const char* dtype;
  Shape shape;
  int axis;
};

}  // namespace castscope::gputest
