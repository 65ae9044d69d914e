// The CPU engine's float32 fast path must give exactly the bits of the generic path. Float64
// input always takes the generic path, so casting the same values as float32 and as float64
// compares the two.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "castscope/cast.hpp"

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
  const char* dtypes[] = {"mxfp4e2",       "mxfp8e4",      "mxfp8e5",       "mxfp6e3",  "mxfp6e2",
                          "mxint8",        "mxint4",       "bfp16",         "e4m3fn_e", "int8_e",
                          "e2m1_e8m0_t32", "e4m3fn",       "e5m2",          "bfloat16", "float16",
                          "e2m1fnuz",      "e3m4_e5m0_t8", "int16_e8m0_t64"};
  const uint64_t seed = 12345;
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

}  // namespace
