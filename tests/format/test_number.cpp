#include <gtest/gtest.h>

#include <cmath>

#include "castscope/format.hpp"

using castscope::Error;
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
  EXPECT_EQ(NumberSpec::parse("e4m3fn").midmax(), (448.0 + 512.0) / 2);
  EXPECT_EQ(NumberSpec::parse("e2m1fnuz").midmax(), 7.0);
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
  auto fnuz = NumberSpec::parse("e2m1fnuz").enumerate();
  EXPECT_TRUE(std::isnan(fnuz[0x8].value));
  auto ocp = NumberSpec::parse("e2m1").enumerate();
  EXPECT_FALSE(std::isnan(ocp[0x8].value));
  EXPECT_EQ(ocp[0x7].value, 6.0);
  auto e5 = NumberSpec::parse("e5m2").enumerate();
  EXPECT_TRUE(std::isinf(e5[0x7C].value));
  EXPECT_TRUE(std::isnan(e5[0x7D].value));
}

}  // namespace
