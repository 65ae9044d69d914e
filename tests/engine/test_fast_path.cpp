// The CPU engine's float32 fast paths (exponent scales and unscaled casts: fast_tile; float
// scales: fast_scaled) must give exactly the bits of the generic path. Float64 input always takes
// the generic path, so casting the same values as float32 and as float64 compares the two.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "castscope/cast.hpp"
#include "test_seed.hpp"

namespace {

using namespace castscope;

// Random values with adversarial ones mixed in: exact ties of small formats, subnormals, powers
// of two, values near format maxima, tiny and huge magnitudes, signed zeros.
std::vector<float> adversarial(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9), ex(-140, 120), mant(0, 15);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (pick(rng)) {
      case 0:
        v[i] = std::ldexp(1.0f + mant(rng) / 16.0f + 1.0f / 32, ex(rng));
        break;  // ties
      case 1:
        v[i] = std::ldexp(static_cast<float>(mant(rng)), -149 + mant(rng));
        break;  // subnormal
      case 2:
        v[i] = std::ldexp(1.0f, ex(rng));
        break;
      case 3:
        v[i] = (mant(rng) & 1 ? 448.0f : 6.0f) * (1 + mant(rng) / 64.0f);
        break;
      case 4:
        v[i] = (mant(rng) & 1) ? -0.0f : 0.0f;
        break;
      default:
        v[i] = nd(rng) * std::ldexp(1.0f, ex(rng) / 8);
        break;
    }
    if (pick(rng) < 3) v[i] = -v[i];
  }
  return v;
}

TEST(FastPath, MatchesGenericPathBitForBit) {
  const char* dtypes[] = {"mxfp4e2", "mxfp8e4", "mxfp8e5", "mxfp6e3", "mxfp6e2", "mxint8", "mxint4",
                          "bfp16", "e4m3fn_e", "int8_e", "e2m1_e8m0_t32", "e4m3fn", "e5m2",
                          "bfloat16", "float16", "e2m1fnuz", "e3m4_e5m0_t8", "int16_e8m0_t64",
                          // float scales: tile, channel and tensor scope, zero points
                          "nvfp4", "int8_sc", "int8_s32", "int4_f32", "int8_b32", "int8_s",
                          "uint4_ss32", "uint4_fi32", "uint8_ssc", "uint4_bb32", "uint8_si",
                          "e4m3fn_float32_t128_t128", "e2m1fnuz_e4m3fn_t16", "e5m2_bfloat16_t32",
                          "int16_float32_t0"};
  const uint64_t seed = test::test_seed();
  for (const char* name : dtypes) {
    const DataType d = DataType::parse(name);
    for (Round round : {Round::Even, Round::Away, Round::Zero, Round::Stochastic}) {
      for (ScaleMode sm : {ScaleMode::Floor, ScaleMode::Midmax, ScaleMode::TopBinade}) {
        std::vector<float> v =
            adversarial(seed + static_cast<int>(round) * 7 + static_cast<int>(sm), 64 * 96);
        // Some tiles entirely tiny or entirely huge, to reach the boundaries of tile_ok.
        for (int j = 0; j < 32; ++j) {
          v[j] = std::ldexp(1.0f + j / 64.0f, -140);
          v[64 + j] = std::ldexp(1.0f + j / 64.0f, 126);
        }
        // NaN and Inf (their tiles take the generic path) and an all-zero row (zero scales).
        v[200] = std::numeric_limits<float>::quiet_NaN();
        v[300] = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < 96; ++j) v[480 + j] = 0.0f;
        // Around bfloat16's largest value and its rounding midpoint to the next binade.
        const uint32_t top[] = {0x7F7F7FFFu, 0x7F7F8000u, 0x7F7F8001u, 0x7F7FFFFFu,
                                0x7F7EFFFFu, 0x7F7E8000u, 0x7F7F0000u, 0x7F000000u};
        for (int j = 0; j < 8; ++j) {
          float f;
          std::memcpy(&f, &top[j], 4);
          v[128 + 2 * j] = f;
          v[129 + 2 * j] = -f;
        }
        Tensor x32 = Tensor::empty(DType::F32, {64, 96});
        Tensor x64 = Tensor::empty(DType::F64, {64, 96});
        for (size_t i = 0; i < v.size(); ++i) {
          x32.mutable_ptr<float>()[i] = v[i];
          x64.mutable_ptr<double>()[i] = v[i];
        }
        for (CastMode mode : {CastMode::Virtual, CastMode::Actual}) {
          CastOptions o;
          o.device = Device::CPU;
          o.round = round;
          o.scale_mode = sm;
          o.seed = 99;
          o.mode = mode;
          CastResult a = cast(x32, d, o), b = cast(x64, d, o);
          const Tensor& ta = mode == CastMode::Virtual ? a.values : a.codes;
          const Tensor& tb = mode == CastMode::Virtual ? b.values : b.codes;
          ASSERT_EQ(ta.nbytes(), tb.nbytes());
          for (int64_t i = 0; i < ta.numel(); ++i) {
            const size_t es = dtype_size(ta.dtype());
            ASSERT_EQ(0, std::memcmp(static_cast<const char*>(ta.data()) + i * es,
                                     static_cast<const char*>(tb.data()) + i * es, es))
                << name << " round " << to_string(round) << " scale " << to_string(sm) << " mode "
                << to_string(mode) << " element " << i << " input " << v[i] << " seed " << seed;
          }
          EXPECT_EQ(a.counts.clipped, b.counts.clipped) << name;
          if (mode == CastMode::Actual && a.scale) {
            ASSERT_EQ(0, std::memcmp(a.scale.data(), b.scale.data(), a.scale.nbytes())) << name;
          }
        }
      }
    }
  }
}

// Every code of the float data formats, as one tile with a float32 scale of exactly 1 (the
// tile's largest value is the format's maximum): a code must come back as itself, on the fast
// path (float32 input) as on the generic one (float64), and the values must agree.
TEST(FastPath, FloatScaledCodesRoundTrip) {
  for (const char* num : {"e2m1fnuz", "e2m1", "e4m3fn", "e5m2", "e3m2fnuz", "e2m3fnuz", "e5m3",
                          "e4m3fnuz", "e3m4", "float16", "bfloat16"}) {
    const DataType d = DataType::parse(std::string(num) + "_float32_t0");
    const NumberSpec& ns = d.number();
    const int bits = ns.format().bits;
    const int64_t n = int64_t{1} << std::min(bits, 16);
    std::vector<uint32_t> codes;
    std::vector<double> vals;
    for (int64_t c = 0; c < n; ++c) {
      const double v = scalar::decode_value(static_cast<uint32_t>(c), ns.format());
      if (v - v != 0) continue;  // NaN / Inf codes
      codes.push_back(static_cast<uint32_t>(c));
      vals.push_back(v);
    }
    const int64_t m = static_cast<int64_t>(vals.size());
    Tensor x32 = Tensor::empty(DType::F32, {1, m}), x64 = Tensor::empty(DType::F64, {1, m});
    for (int64_t i = 0; i < m; ++i) {
      x32.mutable_ptr<float>()[i] = static_cast<float>(vals[i]);
      x64.mutable_ptr<double>()[i] = vals[i];
    }
    CastOptions o;
    o.device = Device::CPU;
    o.mode = CastMode::Actual;
    CastResult a = cast(x32, d, o), b = cast(x64, d, o);
    ASSERT_EQ(a.codes.nbytes(), b.codes.nbytes()) << num;
    ASSERT_EQ(0, std::memcmp(a.codes.data(), b.codes.data(), a.codes.nbytes())) << num;
    ASSERT_EQ(1.0, scalar::decode_value(a.scale.ptr<uint32_t>()[0], d.scale()->scale.format()))
        << num;
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t got = a.codes.nbytes() == static_cast<size_t>(m) ? a.codes.ptr<uint8_t>()[i]
                                                                      : a.codes.ptr<uint16_t>()[i];
      const double v = scalar::decode_value(got, ns.format());
      // -0 codes of formats without a distinct -0 come back as +0
      EXPECT_TRUE(got == codes[i] || (v == 0 && vals[i] == 0)) << num << " code " << codes[i];
      EXPECT_EQ(v, vals[i]) << num << " code " << codes[i];
    }
    o.mode = CastMode::Virtual;
    a = cast(x32, d, o);
    b = cast(x64, d, o);
    ASSERT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.nbytes())) << num;
  }
}

// Unscaled casts (values and codes) of float32 to bfloat16, float16 and the FP8 formats, over
// every combination of sign, exponent and top 11 significand bits with 16 patterns of the low 12
// bits (exact ties, just above and below them, random): 2^24 inputs per format, NaN, Inf and
// subnormals included.
TEST(FastPath, UnscaledCastsOverFloat32Patterns) {
  const uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  uint32_t low[16] = {0, 1, 2, 0x7FF, 0x800, 0x801, 0xFFF, 0x400, 0xC00, 0x555, 0xAAA};
  for (int k = 11; k < 16; ++k) low[k] = static_cast<uint32_t>(rng() & 0xFFF);
  const int64_t slice = int64_t{1} << 22;
  Tensor x32 = Tensor::empty(DType::F32, {slice}), x64 = Tensor::empty(DType::F64, {slice});
  for (const char* name : {"bfloat16", "float16", "e4m3fn", "e5m2"}) {
    const DataType d = DataType::parse(name);
    for (int64_t s = 0; s < 4; ++s) {
      for (int64_t i = 0; i < slice; ++i) {
        const uint32_t u = static_cast<uint32_t>(((s * slice + i) >> 4) << 12) | low[i & 15];
        float f;
        std::memcpy(&f, &u, 4);
        x32.mutable_ptr<float>()[i] = f;
        x64.mutable_ptr<double>()[i] = f;
      }
      for (CastMode mode : {CastMode::Virtual, CastMode::Actual}) {
        CastOptions o;
        o.device = Device::CPU;
        o.mode = mode;
        const CastResult a = cast(x32, d, o), b = cast(x64, d, o);
        const Tensor& ta = mode == CastMode::Virtual ? a.values : a.codes;
        const Tensor& tb = mode == CastMode::Virtual ? b.values : b.codes;
        ASSERT_EQ(ta.nbytes(), tb.nbytes());
        const size_t es = dtype_size(ta.dtype());
        const char* pa = static_cast<const char*>(ta.data());
        const char* pb = static_cast<const char*>(tb.data());
        for (int64_t i = 0; i < slice; ++i)
          ASSERT_EQ(0, std::memcmp(pa + i * es, pb + i * es, es))
              << name << " " << to_string(mode) << " input bits " << std::hex
              << scalar::float_bits(x32.ptr<float>()[i]) << " seed " << std::dec << seed;
        EXPECT_EQ(a.counts.clipped, b.counts.clipped) << name;
      }
    }
  }
}

}  // namespace
