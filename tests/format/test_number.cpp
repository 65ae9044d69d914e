#include <gtest/gtest.h>

#include <cmath>

#include "castscope/format.hpp"

using castscope::CodeValue;
using castscope::Error;
using castscope::InfNan;
using castscope::NumberSpec;

namespace {

struct Published {
  const char* spec;
  double max;
  double min_normal;
  double min_subnormal;
};

// Values from the OCP 8-bit FP / MX specifications, IEEE 754 and the fnuz (Graphcore/AMD) papers.
TEST(NumberSpec, PublishedProperties) {
  const Published cases[] = {
      {"e4m3fn", 448, 0x1p-6, 0x1p-9},
      {"e5m2", 57344, 0x1p-14, 0x1p-16},
      {"e4m3b8fnuz", 240, 0x1p-7, 0x1p-10},
      {"e5m2b16fnuz", 57344, 0x1p-15, 0x1p-17},
      {"e2m1", 6, 1, 0.5},
      {"e2m1fnuz", 6, 1, 0.5},
      {"e3m2", 28, 0.25, 0.0625},
      {"e2m3", 7.5, 1, 0.125},
      {"float16", 65504, 0x1p-14, 0x1p-24},
      {"bfloat16", 0x1.FEp127, 0x1p-126, 0x1p-133},
      {"float32", 0x1.FFFFFEp127, 0x1p-126, 0x1p-149},
  };
  for (const Published& c : cases) {
    NumberSpec n = NumberSpec::parse(c.spec);
    EXPECT_EQ(n.max(), c.max) << c.spec;
    EXPECT_EQ(n.min_normal(), c.min_normal) << c.spec;
    EXPECT_EQ(n.min_subnormal(), c.min_subnormal) << c.spec;
  }
}

TEST(NumberSpec, E8M0Range) {
  NumberSpec n = NumberSpec::parse("e8m0");
  EXPECT_TRUE(n.is_exponent());
  EXPECT_EQ(n.bias(), 127);
  EXPECT_EQ(n.max(), std::ldexp(1.0, 127));
  EXPECT_EQ(n.min_normal(), std::ldexp(1.0, -127));
  auto codes = n.enumerate();
  ASSERT_EQ(codes.size(), 256u);
  EXPECT_EQ(codes[0].value, std::ldexp(1.0, -127));
  EXPECT_EQ(codes[127].value, 1.0);
  EXPECT_EQ(codes[254].value, std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(codes[255].value));
}

TEST(NumberSpec, IntegerRanges) {
  NumberSpec i8 = NumberSpec::parse("int8");
  EXPECT_EQ(i8.int_min(), -127);
  EXPECT_EQ(i8.int_max(), 127);
  EXPECT_EQ(i8.max(), 127.0 / 64);  // fixed point with one integer bit
  NumberSpec u4 = NumberSpec::parse("uint4");
  EXPECT_EQ(u4.int_min(), 0);
  EXPECT_EQ(u4.int_max(), 15);
  NumberSpec i4 = NumberSpec::parse("int4");
  EXPECT_EQ(i4.int_max(), 7);
  EXPECT_EQ(NumberSpec::parse("int32").int_max(), 2147483647);
  EXPECT_THROW(NumberSpec::parse("int1"), Error);
  EXPECT_THROW(NumberSpec::parse("uint33"), Error);
}

TEST(NumberSpec, MidmaxAndEps) {
  // Decision 3: halfway between max and the next value of the top binade's spacing; where the
  // top code is NaN that is not (max + 2^(emax+1)) / 2 = 480.
  EXPECT_EQ(NumberSpec::parse("e4m3fn").midmax(), 464.0);
  EXPECT_EQ(NumberSpec::parse("e5m2").midmax(), 61440.0);
  EXPECT_EQ(NumberSpec::parse("e2m1fnuz").midmax(), 7.0);
  EXPECT_EQ(NumberSpec::parse("e3m2fnuz").midmax(), 30.0);
  EXPECT_EQ(NumberSpec::parse("e2m3fnuz").midmax(), 7.75);
  EXPECT_EQ(NumberSpec::parse("e4m3b8fnuz").midmax(), 248.0);
  EXPECT_EQ(NumberSpec::parse("e8m0").eps(), 1.0);
  EXPECT_EQ(NumberSpec::parse("e5m2").eps(), 0.25);
  EXPECT_EQ(NumberSpec::parse("bfloat16").eps(), 1.0 / 128);
}

TEST(NumberSpec, NamesAndAliases) {
  EXPECT_EQ(NumberSpec::parse("torch.float8_e4m3fn"), NumberSpec::parse("e4m3fn"));
  EXPECT_EQ(NumberSpec::parse("float8_e4m3fnuz"), NumberSpec::parse("e4m3b8fnuz"));
  EXPECT_EQ(NumberSpec::parse("float8_e5m2fnuz"), NumberSpec::parse("e5m2b16fnuz"));
  EXPECT_EQ(NumberSpec::parse("torch.bfloat16").name(), "bfloat16");
  EXPECT_EQ(NumberSpec::parse("e5m10").name(), "float16");
  EXPECT_EQ(NumberSpec::parse("e4m3fnuz").bias(), 7);  // spec decision 9
  EXPECT_EQ(NumberSpec::parse("E4M3FN").name(), "e4m3fn");
  EXPECT_EQ(NumberSpec::parse("e4m3b9").name(), "e4m3b9");
  EXPECT_EQ(NumberSpec::parse("torch.float8_e4m3fn").torch_name(), "torch.float8_e4m3fn");
  EXPECT_EQ(NumberSpec::parse("e4m3fn").cuda_name(), "__nv_fp8_e4m3");
}

TEST(NumberSpec, RoundTripNames) {
  for (int e = 1; e <= 8; ++e)
    for (int m = 0; m <= 10; ++m)
      for (const char* suf : {"", "fn", "fnuz"}) {
        std::string s = "e" + std::to_string(e) + "m" + std::to_string(m) + suf;
        try {
          NumberSpec n = NumberSpec::parse(s);
          EXPECT_EQ(NumberSpec::parse(n.name()), n) << s;
        } catch (const Error&) {
          // Invalid combinations (e.g. fn without mantissa) are errors, never crashes.
        }
      }
}

TEST(NumberSpec, EnumerateE4M3FN) {
  auto codes = NumberSpec::parse("e4m3fn").enumerate();
  ASSERT_EQ(codes.size(), 256u);
  EXPECT_EQ(codes[0x7E].value, 448);
  EXPECT_TRUE(std::isnan(codes[0x7F].value));
  EXPECT_TRUE(std::isnan(codes[0xFF].value));
  EXPECT_EQ(codes[0x01].value, 0x1p-9);
  EXPECT_EQ(codes[0x80].value, 0.0);
  EXPECT_TRUE(std::signbit(codes[0x80].value));
  // Decision 9: TensorCast's e2m1fnuz is OCP FP4 E2M1: 0x8 is -0, no NaN anywhere.
  auto fnuz = NumberSpec::parse("e2m1fnuz").enumerate();
  EXPECT_EQ(fnuz[0x8].value, 0.0);
  EXPECT_TRUE(std::signbit(fnuz[0x8].value));
  EXPECT_EQ(fnuz[0x8].note, "-0");
  for (const CodeValue& c : fnuz) EXPECT_FALSE(std::isnan(c.value)) << c.code;
  auto ocp = NumberSpec::parse("e2m1").enumerate();
  EXPECT_FALSE(std::isnan(ocp[0x8].value));
  EXPECT_EQ(ocp[0x7].value, 6.0);
  auto e5 = NumberSpec::parse("e5m2").enumerate();
  EXPECT_TRUE(std::isinf(e5[0x7C].value));
  EXPECT_TRUE(std::isnan(e5[0x7D].value));
}

// Decision 9: fnuz of at most 6 bits is the OCP-style format (no NaN, -0 kept); from 7 bits on
// it keeps the 8-bit meaning (NaN in the -0 code).
TEST(NumberSpec, SubByteFnuzIsOcp) {
  for (const char* name : {"e2m1fnuz", "e2m3fnuz", "e3m2fnuz", "e2m2fnuz", "e3m1fnuz"}) {
    const NumberSpec n = NumberSpec::parse(name);
    EXPECT_EQ(n.infnan(), InfNan::Finite) << name;
    EXPECT_EQ(n.nan_encoding(), "none") << name;
    EXPECT_EQ(n.name(), name);
    EXPECT_EQ(NumberSpec::parse(n.name()), n);
  }
  EXPECT_EQ(NumberSpec::parse("e2m1"), NumberSpec::parse("e2m1fnuz"));
  EXPECT_EQ(NumberSpec::parse("e3m2"), NumberSpec::parse("e3m2fnuz"));
  EXPECT_EQ(NumberSpec::parse("float4_e2m1fn_x2").name(), "e2m1fnuz");
  EXPECT_EQ(NumberSpec::parse("e2m2fnuz").max(), 7.0);
  const NumberSpec e3m3 = NumberSpec::parse("e3m3fnuz");  // 7 bits: a true fnuz format
  EXPECT_EQ(e3m3.infnan(), InfNan::FNUZ);
  EXPECT_TRUE(std::isnan(e3m3.enumerate()[0x40].value));
}

// TensorCast writes its integers as e1mYb1fnuz: int(Y+2).
TEST(NumberSpec, TensorCastIntegers) {
  EXPECT_EQ(NumberSpec::parse("e1m6b1fnuz"), NumberSpec::parse("int8"));
  EXPECT_EQ(NumberSpec::parse("e1m2b1fnuz"), NumberSpec::parse("int4"));
  EXPECT_EQ(NumberSpec::parse("e1m3b1fnuz").name(), "int5");
  EXPECT_NE(NumberSpec::parse("e1m2fnuz"), NumberSpec::parse("int4"));  // bias 0: a float
}

}  // namespace
