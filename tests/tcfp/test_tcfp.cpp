#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"
#include "castscope/tcfp.hpp"

namespace {

using namespace castscope;

Tensor gaussian(Shape shape, uint64_t seed, float sigma = 1.0f) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = nd(rng);
  return t;
}

CastOptions cpu(CastMode mode = CastMode::Virtual) {
  CastOptions o;
  o.device = Device::CPU;
  o.mode = mode;
  return o;
}

TEST(TCFP, BitsPerValue) {
  EXPECT_DOUBLE_EQ(DataType::parse("tcfp8").bits_per_value(), 8.25);
  EXPECT_DOUBLE_EQ(DataType::parse("tcfp12").bits_per_value(), 12.5);
  EXPECT_DOUBLE_EQ(DataType::parse("tcfp16").bits_per_value(), 16.5);
  EXPECT_DOUBLE_EQ(DataType::parse("mx9").bits_per_value(), 9);
  EXPECT_DOUBLE_EQ(DataType::parse("mx6").bits_per_value(), 6);
  EXPECT_DOUBLE_EQ(DataType::parse("mx4").bits_per_value(), 4);
  EXPECT_EQ(DataType::parse(DataType::parse("tcfp12").str()), DataType::parse("tcfp12"));
}

// Quality on N(0,1): each format lands in the band tcfp.md reports (with margin), and the
// ordering of the family holds.
TEST(TCFP, QualityOrdering) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    Tensor x = gaussian({256, 512}, seed);
    auto snr = [&](const char* d) {
      return compute_stats(x, cast(x, DataType::parse(d), cpu()).values).snr_db;
    };
    const double s8 = snr("tcfp8"), s12 = snr("tcfp12"), s16 = snr("tcfp16"), bf = snr("bfloat16");
    EXPECT_GT(s8, 30.0) << "seed " << seed;
    EXPECT_GT(s12, 44.5) << "seed " << seed;
    EXPECT_GT(s16, 62.5) << "seed " << seed;
    EXPECT_GT(s16, bf) << "TCFP-16 beats bfloat16 (block scaling), seed " << seed;
    EXPECT_GT(s12, s8 + 12) << "seed " << seed;
    EXPECT_GT(snr("mx9"), snr("mxint8")) << "microexponents add precision, seed " << seed;
  }
}

// Element-wise error bounds from the actual codes: the residual term of TCFP-12 is rounded to
// nearest on a grid of 2^(rs-2) with no clipping, so |x - q| <= 2^(rs-3); for TCFP-16 the low
// FP8 term has 3 mantissa bits, so |x - q| <= max(|r| 2^-4, 2^(rs-10)) with r = x - hi.
TEST(TCFP, ErrorBoundsFromCodes) {
  Tensor x = gaussian({64, 256}, 7, 3.0f);
  const auto e4m3 = NumberSpec::parse("e4m3fn").enumerate();
  for (const char* name : {"tcfp12", "tcfp16"}) {
    CastResult a = cast(x, DataType::parse(name), cpu(CastMode::Actual));
    Tensor q = upcast(a);
    const uint8_t* rscale = a.residual_scale.ptr<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int rs = static_cast<int>(rscale[i / 32]) - 127;
      const double err = std::fabs(static_cast<double>(q.ptr<float>()[i]) - x.ptr<float>()[i]);
      if (std::string(name) == "tcfp12") {
        const int8_t code = a.residual.ptr<int8_t>()[i];
        ASSERT_GE(code, -7) << i;
        ASSERT_LE(code, 7) << i;
        ASSERT_LE(err, std::ldexp(1.0, rs - 3) * (1 + 1e-6) + 1e-30) << name << " element " << i;
      } else {
        const uint8_t code = a.residual.ptr<uint8_t>()[i];
        ASSERT_NE(code & 0x7F, 0x7F) << "residual code is NaN at " << i;
        const int s = static_cast<int>(a.scale.ptr<uint8_t>()[i / 32]) - 127;
        const double hi = std::ldexp(e4m3[a.codes.ptr<uint8_t>()[i]].value, s);
        const double r = std::fabs(x.ptr<float>()[i] - hi);
        ASSERT_LE(err, std::max(r * 0x1p-4, std::ldexp(1.0, rs - 10)) * (1 + 1e-6))
            << name << " element " << i;
      }
    }
  }
}

// The residual terms are exactly what the codes hold: decoding the actual result gives the
// virtual cast's bits, and packing (TCFP-12's nibbles) round-trips.
TEST(TCFP, CompressRoundTripIsBitExact) {
  for (const char* name : {"tcfp8", "tcfp12", "tcfp16", "mx9", "mx6", "mx4"}) {
    for (uint64_t seed : {11u, 12u}) {
      Tensor x = gaussian({8, 100}, seed, 2.0f);  // 100 does not divide by 32 or 16: padding
      x.mutable_ptr<float>()[5] = 0x1p-140f;
      x.mutable_ptr<float>()[6] = -0.0f;
      x.mutable_ptr<float>()[7] = 1e30f;
      Tensor v = cast(x, DataType::parse(name), cpu()).values;
      CastResult c = cast(x, DataType::parse(name), cpu(CastMode::Compress));
      Tensor u = upcast(c);
      ASSERT_EQ(0, std::memcmp(u.data(), v.data(), v.nbytes())) << name << " seed " << seed;
      Tensor u2 = upcast(unpack(pack(unpack(c))));
      ASSERT_EQ(0, std::memcmp(u2.data(), v.data(), v.nbytes())) << name << " seed " << seed;
    }
  }
}

TEST(TCFP, PackedResidualIsHalfTheBytes) {
  Tensor x = gaussian({4, 64}, 3);
  CastResult c = cast(x, DataType::parse("tcfp12"), cpu(CastMode::Compress));
  EXPECT_EQ(c.residual.nbytes(), x.numel() / 2);
  EXPECT_EQ(c.codes.nbytes(), static_cast<size_t>(x.numel()));
  EXPECT_EQ(c.scale.numel(), x.numel() / 32);
}

// NormalFloat-aware selection clips a few Gaussian outliers (about the 3-sigma tail that lands
// above the format's max); absmax selection never clips; a constant block falls back to absmax.
TEST(TCFP, NormalFloatScaleSelection) {
  Tensor x = gaussian({512, 512}, 5);
  CastOptions nf = cpu(), am = cpu();
  am.tcfp_nf_aware = false;
  CastResult rn = cast(x, DataType::parse("tcfp8"), nf), ra = cast(x, DataType::parse("tcfp8"), am);
  EXPECT_GT(rn.counts.clipped, 0);
  EXPECT_LT(rn.counts.clipped, x.numel() / 100);
  EXPECT_EQ(ra.counts.clipped, 0);
  Tensor c = Tensor::empty(DType::F32, {1, 32});
  for (int i = 0; i < 32; ++i) c.mutable_ptr<float>()[i] = 3.25f;
  CastResult rc = cast(c, DataType::parse("tcfp8"), nf);
  EXPECT_EQ(rc.counts.clipped, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(rc.values.ptr<float>()[i], 3.25f);
}

// A block with NaN / Inf decodes to NaN as a whole (like an MX tile); other blocks are unaffected.
TEST(TCFP, NonFiniteBlocks) {
  Tensor x = gaussian({2, 64}, 9);
  x.mutable_ptr<float>()[3] = std::numeric_limits<float>::infinity();
  for (const char* name : {"tcfp8", "tcfp12", "tcfp16"}) {
    CastResult r = cast(x, DataType::parse(name), cpu());
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(r.values.ptr<float>()[i])) << name;
    for (int i = 32; i < 128; ++i) EXPECT_TRUE(std::isfinite(r.values.ptr<float>()[i])) << name;
    EXPECT_EQ(r.counts.nonfinite, 1);
  }
}

// Error feedback: casting the same tensor repeatedly with the carried error makes the running
// mean of the results converge to x, far closer than one cast is.
TEST(TCFP, ErrorFeedbackDrivesMeanErrorToZero) {
  const uint64_t seed = 42;
  Tensor x = gaussian({64, 128}, seed, 0.7f);
  tcfp::ErrorFeedback ef;
  const DataType d = DataType::parse("tcfp8");
  std::vector<double> acc(static_cast<size_t>(x.numel()), 0.0);
  const int steps = 100;
  for (int t = 0; t < steps; ++t) {
    Tensor q = ef.step("layer0.weight", x, d, cpu());
    for (int64_t i = 0; i < x.numel(); ++i) acc[i] += q.ptr<float>()[i];
  }
  EXPECT_TRUE(ef.has("layer0.weight"));
  double single = 0, fed = 0;
  Tensor q1 = cast(x, d, cpu()).values;
  for (int64_t i = 0; i < x.numel(); ++i) {
    single += std::fabs(q1.ptr<float>()[i] - x.ptr<float>()[i]);
    fed += std::fabs(acc[i] / steps - x.ptr<float>()[i]);
  }
  EXPECT_LT(fed, single * 0.05) << "seed " << seed << ": mean |avg(q) - x| " << fed / x.numel()
                                << " vs one cast " << single / x.numel();
  ef.reset("layer0.weight");
  EXPECT_FALSE(ef.has("layer0.weight"));
  Tensor wrong = gaussian({4, 4}, 1);
  ef.step("w", x, d, cpu());
  EXPECT_THROW(ef.step("w", wrong, d, cpu()), Error);
}

// MX9 / MX6 / MX4: every element's magnitude fits its sign-magnitude width, and the error of a
// value is at most half its pair's quantum unless it saturated at the top of its binade.
// MX9 / MX6 / MX4 and the width of their elements in bits (sign and magnitude).
struct SharedMx {
  const char* name;
  int bits;
};
constexpr SharedMx kSharedMx[] = {{"mx9", 8}, {"mx6", 5}, {"mx4", 3}};

TEST(SharedMicroexponents, CodesAndErrorBounds) {
  for (const SharedMx& f : kSharedMx) {
    const int mag_bits = f.bits - 1;
    Tensor x = gaussian({32, 64}, 77);
    CastResult a = cast(x, DataType::parse(f.name), cpu(CastMode::Actual));
    Tensor q = upcast(a);
    ASSERT_EQ(a.meta.numel(), x.numel() / 2) << "one microexponent bit per pair";
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int code = a.codes.ptr<int8_t>()[i];
      ASSERT_LE(std::abs(code), (1 << mag_bits) - 1) << f.name << " element " << i;
      const int e =
          static_cast<int>(a.scale.ptr<uint8_t>()[i / 16]) - 127 - a.meta.ptr<uint8_t>()[i / 2];
      const double quantum = std::ldexp(1.0, e - (mag_bits - 1));
      const double err = std::fabs(static_cast<double>(q.ptr<float>()[i]) - x.ptr<float>()[i]);
      if (std::abs(code) < (1 << mag_bits) - 1)
        ASSERT_LE(err, quantum / 2) << f.name << " element " << i;
      else
        ASSERT_LE(err, quantum) << f.name << " saturated element " << i;
    }
  }
}

}  // namespace

namespace {

// The packed MX9 / MX6 / MX4 elements are sign-magnitude (sign in bit K-1): compare the packed
// bytes with the actual-mode two's complement codes.
TEST(SharedMicroexponents, PackedElementsAreSignMagnitude) {
  using namespace castscope;
  for (const SharedMx& f : kSharedMx) {
    Tensor x = gaussian({4, 32}, 31);
    CastResult a = cast(x, DataType::parse(f.name), cpu(CastMode::Actual));
    CastResult c = pack(a);
    const int per = f.bits <= 4 ? 2 : 1;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int q = a.codes.ptr<int8_t>()[i];
      const uint8_t byte = c.codes.ptr<uint8_t>()[i / per];
      const int stored = per == 2 ? (byte >> ((i % 2) * 4)) & 0xF : byte;
      const int expect = q < 0 ? ((1 << (f.bits - 1)) | -q) : q;
      ASSERT_EQ(stored, expect) << f.name << " element " << i;
    }
    EXPECT_EQ(c.meta.nbytes(), static_cast<size_t>(x.numel() / 2 / 8)) << "one bit per pair";
  }
}

}  // namespace
