// Block Hadamard rotation: against a dense Sylvester matrix in double, exact round trips where
// the arithmetic is exact, the cast wrap (virtual / actual / compress agree), plans and exports.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/metrics.hpp"
#include "castscope/rotate.hpp"
#include "rotation/hadamard.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

constexpr uint64_t kSeed = 20261123;

using test::normal;
using test::same_bits;

// Entry (i, j) of the Sylvester Hadamard matrix: (-1)^popcount(i & j).
double sylvester(int i, int j) {
  return (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -1.0 : 1.0;
}

TEST(Rotation, MatchesDenseSylvesterMatrixWithSigns) {
  for (int n : {16, 32, 64, 128, 256}) {
    for (bool signs : {false, true}) {
      const Rotation r{n, signs, kSeed + n};
      const int64_t rows = 3, len = 2 * n;
      const Tensor x = normal({rows, len}, kSeed + n);
      const Tensor y = rotate(x, r, -1, false, Device::CPU);
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t b = 0; b < len / n; ++b)
          for (int i = 0; i < n; ++i) {
            double ref = 0, mag = 0;
            for (int j = 0; j < n; ++j) {
              const int64_t pos = b * n + j;
              const double d = signs && rotation::negative_sign(r.seed, pos) ? -1.0 : 1.0;
              const double term = sylvester(i, j) * d * x.ptr<float>()[row * len + pos];
              ref += term;
              mag += std::fabs(term);
            }
            ref /= std::sqrt(static_cast<double>(n));
            mag /= std::sqrt(static_cast<double>(n));
            // log2(n) float additions and one multiply, each within half an ulp of the running
            // magnitude.
            const double tol = mag * std::ldexp(1.0, -24) * (std::log2(n) + 2);
            ASSERT_NEAR(y.ptr<float>()[row * len + b * n + i], ref, tol)
                << "n=" << n << " signs=" << signs << " row=" << row << " i=" << i;
          }
    }
  }
}

TEST(Rotation, SignsDependOnSeedAndArePlusMinusHalf) {
  int neg = 0, differ = 0;
  for (int64_t p = 0; p < 4096; ++p) {
    neg += rotation::negative_sign(7, p);
    differ += rotation::negative_sign(7, p) != rotation::negative_sign(8, p);
  }
  EXPECT_GT(neg, 1800);
  EXPECT_LT(neg, 2300);
  EXPECT_GT(differ, 1800);
}

TEST(Rotation, RoundTripIsExactWhereTheArithmeticIs) {
  // Small integers: sums are exact and 1/4, 1/8, 1/16 are powers of two for n = 16, 64, 256.
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<int> v(-1000, 1000);
  for (int n : {16, 64, 256}) {
    Tensor x = Tensor::empty(DType::F32, {4, 512});
    for (int64_t i = 0; i < x.numel(); ++i) x.mutable_ptr<float>()[i] = static_cast<float>(v(rng));
    const Rotation r{n, true, kSeed};
    const Tensor back = rotate(rotate(x, r, 1, false), r, 1, true);
    // Values, not bits: a zero may come back as -0 after a sign flip.
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(back.ptr<float>()[i], x.ptr<float>()[i]) << "n=" << n << " i=" << i;
  }
  // Any n, any values: the inverse undoes the forward map to float rounding.
  for (int n : {32, 128}) {
    const Tensor x = normal({8, 256}, kSeed + 1);
    const Tensor back = rotate(rotate(x, {n, true, 3}, -1, false), {n, true, 3}, -1, true);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_NEAR(back.ptr<float>()[i], x.ptr<float>()[i], 1e-5) << "n=" << n << " i=" << i;
  }
}

TEST(Rotation, RotatesAlongTheGivenAxisOnly) {
  const Tensor x = normal({32, 3, 5}, kSeed + 2);
  const Tensor y = rotate(x, {16, false, 0}, 0, false, Device::CPU);
  // Column (j, k) along axis 0 equals rotating that column alone.
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 5; ++k) {
      Tensor col = Tensor::empty(DType::F32, {32});
      for (int i = 0; i < 32; ++i)
        col.mutable_ptr<float>()[i] = x.ptr<float>()[(i * 3 + j) * 5 + k];
      const Tensor rc = rotate(col, {16, false, 0}, 0, false, Device::CPU);
      for (int i = 0; i < 32; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(rc.ptr<float>()[i]),
                  std::bit_cast<uint32_t>(y.ptr<float>()[(i * 3 + j) * 5 + k]));
    }
}

TEST(Rotation, NanFillsItsBlockAsTheOneQuietNan) {
  Tensor x = normal({2, 64}, kSeed + 3);
  x.mutable_ptr<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  x.mutable_ptr<float>()[64 + 40] = -std::numeric_limits<float>::infinity();
  x.mutable_ptr<float>()[64 + 41] = std::numeric_limits<float>::infinity();
  const Tensor y = rotate(x, {32, true, 4}, -1, false, Device::CPU);
  int nans = 0, infs = 0;
  for (int i = 0; i < 128; ++i) {
    const float v = y.ptr<float>()[i];
    const uint32_t b = std::bit_cast<uint32_t>(v);
    if (i < 32) {
      EXPECT_EQ(b, 0x7FC00000u) << i;  // the NaN's block
    } else if (i >= 96) {
      // +Inf and -Inf in one block: each output is their sum or difference, +-Inf or NaN.
      EXPECT_TRUE(std::isinf(v) || b == 0x7FC00000u) << i << " " << v;
      nans += std::isnan(v);
      infs += std::isinf(v);
    } else {
      EXPECT_TRUE(std::isfinite(v)) << i;
    }
  }
  EXPECT_GT(nans, 0);
  EXPECT_GT(infs, 0);
}

TEST(Rotation, CastRotatesAlongItsAxis) {
  // Tiles and the rotation along axis 0 of a [64, 6] tensor: the same as transposing, casting
  // along the last axis, and transposing back.
  const Tensor x = normal({64, 6}, kSeed + 4);
  Tensor xt = Tensor::empty(DType::F32, {6, 64});
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 6; ++j) xt.mutable_ptr<float>()[j * 64 + i] = x.ptr<float>()[i * 6 + j];
  CastOptions o;
  o.rotate = {32, true, 6};
  o.axis = 0;
  const Tensor a = cast(x, DataType::parse("mxfp4e2"), o).values;
  o.axis = -1;
  const Tensor b = cast(xt, DataType::parse("mxfp4e2"), o).values;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 6; ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(a.ptr<float>()[i * 6 + j]),
                std::bit_cast<uint32_t>(b.ptr<float>()[j * 64 + i]))
          << i << "," << j;
}

TEST(Rotation, BadInputIsNamed) {
  const Tensor x = normal({4, 96}, kSeed);
  try {
    rotate(x, {64, false, 0}, -1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("length 96, not a multiple of the block size 64"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rotate(x, {48, false, 0}, -1), Error);
  EXPECT_THROW(rotate(x, {512, false, 0}, -1), Error);
  EXPECT_THROW(rotate(x, {8, false, 0}, -1), Error);
  EXPECT_THROW(rotate(x, {32, false, 0}, 2), Error);
  EXPECT_THROW(cast(x, DataType::parse("mxfp4e2"), CastOptions{.rotate = {64, false, 0}}), Error);
}

TEST(Rotation, ParsePrintRoundTrip) {
  EXPECT_FALSE(parse_rotation("none").enabled());
  EXPECT_FALSE(parse_rotation("").enabled());
  EXPECT_EQ(parse_rotation("128"), (Rotation{128, false, 0}));
  EXPECT_EQ(parse_rotation("h32"), (Rotation{32, false, 0}));
  EXPECT_EQ(parse_rotation("h256r18446744073709551615"),
            (Rotation{256, true, 18446744073709551615ull}));
  for (const Rotation& r : {Rotation{16, false, 0}, Rotation{64, true, 9}})
    EXPECT_EQ(parse_rotation(r.str()), r);
  for (const char* bad :
       {"h", "h24", "h1024", "64r3", "h64r", "h64x", "h64r99999999999999999999", "hadamard"})
    EXPECT_THROW(parse_rotation(bad), Error) << bad;
}

class RotatedCast : public ::testing::TestWithParam<const char*> {};

TEST_P(RotatedCast, VirtualIsInverseOfCastOfRotatedAndCompressAgrees) {
  const DataType d = DataType::parse(GetParam());
  const Tensor x = normal({24, 256}, kSeed + 5, 3.0);
  for (const Rotation& r : {Rotation{32, false, 0}, Rotation{128, true, 11}}) {
    CastOptions o;
    o.device = Device::CPU;
    o.rotate = r;
    const CastResult v = cast(x, d, o);
    // By definition: rotate, cast without rotation, rotate back.
    CastOptions plain = o;
    plain.rotate = {};
    const Tensor expect = rotate(cast(rotate(x, r, -1), d, plain).values, r, -1, true, Device::CPU);
    EXPECT_TRUE(same_bits(v.values, expect)) << r.str();
    EXPECT_EQ(v.options.rotate, r);
    for (CastMode m : {CastMode::Actual, CastMode::Compress}) {
      o.mode = m;
      const CastResult c = cast(x, d, o);
      EXPECT_TRUE(same_bits(upcast(c), v.values)) << r.str() << " " << to_string(m);
      // The codes are those of the rotated tensor.
      plain.mode = m;
      EXPECT_TRUE(same_bits(c.codes, cast(rotate(x, r, -1), d, plain).codes));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Datatypes, RotatedCast,
                         ::testing::Values("mxfp4e2", "nvfp4", "mxfp8e4", "int8_float32_t0",
                                           "e4m3fn", "mx6", "tcfp12"));

TEST(Rotation, SpreadsOutliersSoMxfp4LosesLess) {
  // A heavy-tailed weight (a few large values per row), as LLM weights have: rotating first
  // spreads them over the block so the shared scale fits the rest better.
  Tensor x = normal({64, 1024}, kSeed + 6);
  std::mt19937_64 rng(kSeed + 7);
  std::uniform_int_distribution<int> col(0, 1023);
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < 4; ++k) x.mutable_ptr<float>()[r * 1024 + col(rng)] *= 40.0f;
  const DataType d = DataType::parse("mxfp4e2");
  const double plain = compute_stats(x, cast(x, d).values).snr_db;
  CastOptions o;
  o.rotate = {128, true, 1};
  const double rotated = compute_stats(x, cast(x, d, o).values).snr_db;
  EXPECT_GT(rotated, plain + 1.0) << "plain " << plain << " dB, rotated " << rotated << " dB";
}

// ---------------------------------------------------------------------------------------------
// Plans and exports.

TEST(RotationPlan, RuleFieldParsesPrintsAndOldPlansStillRead) {
  const ExportPlan p = parse_plan(R"({"default": "keep", "rules": [
      {"pattern": "*.mlp.*", "dtype": "mxfp4e2", "rotate": 128},
      {"pattern": "*.attn.*", "dtype": "nvfp4", "rotate": "h64r5"},
      {"pattern": "*", "dtype": "mxfp8e4", "rank": 2}]})",
                                  "p.json");
  EXPECT_EQ(p.rules[0].rotate, (Rotation{128, false, 0}));
  EXPECT_EQ(p.rules[1].rotate, (Rotation{64, true, 5}));
  EXPECT_FALSE(p.rules[2].rotate.enabled());
  const ExportPlan back = parse_plan(plan_to_json(p), "back");
  for (size_t i = 0; i < p.rules.size(); ++i) EXPECT_EQ(back.rules[i].rotate, p.rules[i].rotate);
  EXPECT_EQ(p.rotation_for({"l.mlp.w", "F32", {8, 128}}), (Rotation{128, false, 0}));
  EXPECT_FALSE(p.rotation_for({"l.other", "F32", {8, 128}}).enabled());
  EXPECT_FALSE(p.rotation_for({"l.mlp.idx", "I32", {8, 128}}).enabled());  // kept: no rotation
  // A plan written before rotations existed.
  const ExportPlan old = parse_plan(R"({"default": "keep", "rules": [{"pattern": "*", "dtype":
      "nvfp4", "rank": 2}]})");
  EXPECT_FALSE(old.rules[0].rotate.enabled());
  for (const char* bad : {R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rotate": 48}]})",
                          R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rotate": -1}]})",
                          R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rotate": "x"}]})"}) {
    try {
      parse_plan(bad, "bad.json");
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("plan 'bad.json': rule 0: \"rotate\""),
                std::string::npos)
          << e.what();
    }
  }
}

std::string temp_path(const std::string& leaf) {
  return ::testing::TempDir() + "castscope_rot_" + leaf;
}

TEST(RotationPlan, NativeExportStoresRotatedCodesAndReadsBack) {
  MemoryModel m;
  const Tensor w = normal({16, 256}, kSeed + 8);
  const Tensor keep = normal({16, 256}, kSeed + 9);
  m.add("l.mlp.w", w);
  m.add("l.attn.w", keep);
  const ExportPlan p = parse_plan(R"({"rules": [
      {"pattern": "*.mlp.*", "dtype": "mxfp4e2", "rotate": "h64r3"},
      {"pattern": "*.attn.*", "dtype": "mxfp4e2"}]})");
  const std::string out = temp_path("native.safetensors");
  ExportOptions eo;
  eo.cast.device = Device::CPU;
  export_model(m, out, p, eo);
  const std::vector<io::PackedTensor> back = io::load_packed(out);
  std::remove(out.c_str());
  ASSERT_EQ(back.size(), 2u);
  for (const io::PackedTensor& t : back) {
    CastOptions o;
    o.device = Device::CPU;
    if (t.name == "l.mlp.w") {
      EXPECT_EQ(t.result.options.rotate, (Rotation{64, true, 3}));
      o.rotate = {64, true, 3};
      EXPECT_TRUE(same_bits(upcast(t.result), cast(w, DataType::parse("mxfp4e2"), o).values));
    } else {
      EXPECT_FALSE(t.result.options.rotate.enabled());
      EXPECT_TRUE(same_bits(upcast(t.result), cast(keep, DataType::parse("mxfp4e2"), o).values));
    }
  }
}

TEST(RotationPlan, LayoutsWithoutRotationRefuseARotatedPlan) {
  MemoryModel m;
  m.add("l.mlp.w", normal({16, 256}, kSeed + 10));
  const ExportPlan p = parse_plan(
      R"({"rules": [{"pattern": "*.mlp.*", "dtype": "mxfp4e2", "rotate": 32}]})", "rot.json");
  // Rotations come from the plan alone: one in the export's cast options is not applied.
  {
    const std::string out = temp_path("opts_rotate.safetensors");
    ExportOptions eo;
    eo.cast.rotate = {32, false, 0};
    export_model(m, out, parse_plan(R"({"rules": [{"pattern": "*", "dtype": "mxfp4e2"}]})"), eo);
    const std::vector<io::PackedTensor> back = io::load_packed(out);
    std::remove(out.c_str());
    ASSERT_EQ(back.size(), 1u);
    EXPECT_FALSE(back[0].result.options.rotate.enabled());
    EXPECT_TRUE(same_bits(upcast(back[0].result),
                          cast(m.load("l.mlp.w"), DataType::parse("mxfp4e2")).values));
  }
  for (Layout l : {Layout::GptOss, Layout::CompressedTensors, Layout::GGUF}) {
    const std::string out = temp_path(std::string("refuse_") + to_string(l));
    ExportOptions eo;
    eo.layout = l;
    try {
      export_model(m, out, p, eo);
      FAIL() << to_string(l) << " accepted a rotated plan";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rule 0 ('*.mlp.*') rotates by h32"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cannot store"), std::string::npos) << msg;
    }
    FILE* f = std::fopen(out.c_str(), "rb");
    EXPECT_EQ(f, nullptr) << "a refused export left a file";
    if (f) std::fclose(f);
  }
}

}  // namespace
}  // namespace castscope
