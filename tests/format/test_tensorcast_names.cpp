// Every predefined datatype of TensorCast (tcast/__init__.py, ROCm/tensorcast main) parses under
// its own name, means what TensorCast means by it (the canonical string it prints), and
// round-trips. The table is written from TensorCast's definitions, not from the registry.
#include <gtest/gtest.h>

#include <string>

#include "castscope/datatype.hpp"

namespace {

using castscope::DataType;

struct Name {
  const char* name;
  const char* canonical;
};

// Codebook names (icb44fi*) are listed with the codebook number specs.
const Name kTensorCast[] = {
    {"float32", "float32"},
    {"float16", "float16"},
    {"bfloat16", "bfloat16"},
    {"float8_e5m2", "e5m2"},
    {"float8_e4m3fn", "e4m3fn"},
    {"float8_e5m2fnuz", "e5m2b16fnuz"},
    {"float8_e4m3fnuz", "e4m3b8fnuz"},
    {"e5m2", "e5m2"},
    {"e5m2fnuz", "e5m2fnuz"},
    {"e5m2b16fnuz", "e5m2b16fnuz"},
    {"binary8p3", "e5m2b16fnuz"},
    {"e4m3fnuz", "e4m3fnuz"},
    {"e4m3fn", "e4m3fn"},
    {"e4m3b8fnuz", "e4m3b8fnuz"},
    {"binary8p4", "e4m3b8fnuz"},
    {"binary8p5", "e3m4b4fnuz"},
    {"e3m3fnuz", "e3m3fnuz"},
    {"e3m2fnuz", "e3m2fnuz"},
    {"e2m3fnuz", "e2m3fnuz"},
    {"e2m1fnuz", "e2m1fnuz"},
    {"uint16_ff", "uint16_float16_float16"},
    {"uint16_bb", "uint16_bfloat16_bfloat16"},
    {"int16_f", "int16_float16"},
    {"int16_b", "int16_bfloat16"},
    {"int16_e", "int16_e8m0"},
    // TensorCast builds uint16 under these names (a slip); their plain meaning holds here.
    {"uint8_ff", "uint8_float16_float16"},
    {"uint8_bb", "uint8_bfloat16_bfloat16"},
    {"uint8_fi", "uint8_float16_int8"},
    {"uint8_bi", "uint8_bfloat16_int8"},
    {"int8_f", "int8_float16"},
    {"int8_b", "int8_bfloat16"},
    {"int8_e", "int8_e8m0"},
    {"e5m2_e", "e5m2_e8m0"},
    {"e5m2z_e", "e5m2fnuz_e8m0"},
    {"e4m3_e", "e4m3fn_e8m0"},
    {"e4m3z_e", "e4m3fnuz_e8m0"},
    {"e3m2_e", "e3m2fnuz_e8m0"},
    {"e2m3_e", "e2m3fnuz_e8m0"},
    {"mxfp8e5", "e5m2_e8m0_t32"},
    {"mxfp8e4", "e4m3fn_e8m0_t32"},
    {"mxfp6e3", "e3m2fnuz_e8m0_t32"},
    {"mxfp6e2", "e2m3fnuz_e8m0_t32"},
    {"mxfp4e2", "e2m1fnuz_e8m0_t32"},
    {"mxfp5e2", "e2m2fnuz_e8m0_t32"},
    {"mxint8", "int8_e8m0_t32"},
    {"mxint4", "int4_e8m0_t32"},
    {"bfp16", "int8_e8m0_t8"},
    {"uint4_ff32", "uint4_float16_float16_t32"},
    {"uint4_fi32", "uint4_float16_int8_t32"},
    {"uint4_bb32", "uint4_bfloat16_bfloat16_t32"},
    {"uint4_bi32", "uint4_bfloat16_int8_t32"},
    {"uint4_f12i432", "uint4_e5m6_int4_t32"},
    {"int4_b32", "int4_bfloat16_t32"},
    {"int4_f32", "int4_e5m3_t32"},
    {"e1m6b1_e32", "int8_e8m0_t32"},
    {"e1m2b1_e32", "int4_e8m0_t32"},
    {"e1m2b1_f32", "int4_e5m3_t32"},
    {"e2m1_f32", "e2m1fnuz_e5m3_t32"},
    {"e3m2_f32", "e3m2fnuz_e5m3_t32"},
    {"e2m3_f32", "e2m3fnuz_e5m3_t32"},
    {"e4m3_f32", "e4m3fn_e5m3_t32"},
    {"mx9", "int8_e8m0_t16s2o1"},
    {"mx6", "int5_e8m0_t16s2o1"},
    {"mx4", "int3_e8m0_t16s2o1"},
    {"e2m1_e32s8o1", "e2m1fnuz_e8m0_t32s8o1"},
    {"e2m1_e32s4o1", "e2m1fnuz_e8m0_t32s4o1"},
    {"e2m1_e32s8o2", "e2m1fnuz_e8m0_t32s8o2"},
    {"e2m1_e32s4o2", "e2m1fnuz_e8m0_t32s4o2"},
};

TEST(TensorCastNames, EveryNameMeansWhatTensorCastMeans) {
  EXPECT_EQ(std::size(kTensorCast), 68u);  // 92 predefined names less the 24 codebooks
  for (const Name& n : kTensorCast) {
    DataType d;
    try {
      d = DataType::parse(n.name);
    } catch (const castscope::Error& e) {
      ADD_FAILURE() << n.name << " does not parse: " << e.what();
      continue;
    }
    EXPECT_EQ(d.str(), n.canonical) << n.name;
    const DataType again = DataType::parse(d.str());
    EXPECT_TRUE(again == d) << n.name << " -> " << d.str() << " -> " << again.str();
    EXPECT_EQ(again.str(), d.str()) << n.name;
    // The TensorCast spelling of the same string, where it differs from the canonical one.
    EXPECT_TRUE(DataType::parse(n.canonical) == d) << n.name;
  }
}

// The spellings TensorCast itself uses inside those definitions parse to the same datatypes.
TEST(TensorCastNames, TensorCastSpellings) {
  const Name spellings[] = {
      {"e1m6b1fnuz_e8m0_t32", "int8_e8m0_t32"},
      {"e1m2b1fnuz_e5m3_t32", "int4_e5m3_t32"},
      {"int8_e8m0_t16s2", "int8_e8m0_t16s2o1"},  // MX9 as written before offsets had a name
      {"int3_e8m0_t16s2", "int3_e8m0_t16s2o1"},
      {"e2m1fnuz_e8m0_t32s8o2", "e2m1fnuz_e8m0_t32s8o2"},
      {"e2m1_e8m0_t32s4o1", "e2m1fnuz_e8m0_t32s4o1"},
  };
  for (const Name& n : spellings) EXPECT_EQ(DataType::parse(n.name).str(), n.canonical) << n.name;
  EXPECT_EQ(DataType::parse("int8_e8m0_t16s2").name(), "mx9");
  EXPECT_EQ(DataType::parse("e2m1fnuz_e8m0_t32s4o2").name(), "e2m1_e32s4o2");
  // K bits of offset per subtile of S, beside the scale's bits per tile.
  EXPECT_DOUBLE_EQ(DataType::parse("mx9").bits_per_value(), 8 + 8.0 / 16 + 1.0 / 2);
  EXPECT_DOUBLE_EQ(DataType::parse("e2m1_e32s4o2").bits_per_value(), 4 + 8.0 / 32 + 2.0 / 4);
}

TEST(TensorCastNames, OffsetErrorsNameTheSegment) {
  for (const char* bad : {"e2m1fnuz_e8m0_t32o1", "e2m1fnuz_e8m0_t32s8o3", "e2m1fnuz_e8m0_t32s8o0",
                          "e2m1fnuz_float16_t32s8o1"}) {
    try {
      DataType::parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const castscope::Error& e) {
      EXPECT_NE(std::string(e.what()).find("t32"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
