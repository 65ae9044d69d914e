// Codebook datatypes: names and strings, generic table files, modes and packed layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "castscope/cast.hpp"

using namespace castscope;

namespace {

const char* kNames[] = {"icb44fi4_e32",   "icb44fi4_f32",   "icb44fi4_e32s16", "icb44fi4_f32s16",
                        "icb44fi4_e32s8", "icb44fi4_f32s8", "icb44fi4_e32s4",  "icb44fi4_f32s4",
                        "icb44fi3_e32",   "icb44fi3_f32",   "icb44fi3_e32s16", "icb44fi3_f32s16",
                        "icb44fi3_e32s8", "icb44fi3_f32s8", "icb44fi3_e32s4",  "icb44fi3_f32s4",
                        "icb44fi2_e32",   "icb44fi2_f32",   "icb44fi2_e32s16", "icb44fi2_f32s16",
                        "icb44fi2_e32s8", "icb44fi2_f32s8", "icb44fi2_e32s4",  "icb44fi2_f32s4"};

Tensor gaussian(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  Tensor t = Tensor::empty(DType::F32, s);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = nd(rng) * std::ldexp(1.0f, static_cast<int>(i % 7) - 3);
  p[3] = 0.0f;
  p[4] = -0.0f;
  return t;
}

int64_t first_diff(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.ptr<float>() + i, b.ptr<float>() + i, 4) != 0) return i;
  return -1;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(CASTSCOPE_BINARY_DIR) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(CodebookNames, EveryTensorCastNameParsesPrintsAndRoundTrips) {
  for (const char* n : kNames) {
    const DataType d = DataType::parse(n);
    EXPECT_EQ(d.family(), Family::Codebook) << n;
    EXPECT_EQ(d.name(), n);
    const DataType again = DataType::parse(d.str());
    EXPECT_EQ(again, d) << n << " -> " << d.str();
    EXPECT_EQ(again.name(), n) << d.str() << " is the registry's spelling of " << n;
    EXPECT_EQ(d.codebook()->num_maps(), 16) << n;
    EXPECT_EQ(d.codebook()->maps.size(), 16u) << n;
  }
  // TensorCast's definitions: f32 names use e5m0 per tile, e5m3 float scales with subtiles.
  EXPECT_EQ(DataType::parse("icb44fi4_e32s8").str(), "icb44fi_e4m3fn_e8m0_t32s8");
  EXPECT_EQ(DataType::parse("icb44fi3_f32").str(), "icb44fi_e3m2fnuz_e5m0_t32");
  EXPECT_EQ(DataType::parse("icb44fi2_f32s4").str(), "icb44fi_e2m3fnuz_e5m3_t32s4");
  // Bits: 4-bit index, 8-bit scale per 32, 4-bit mapping choice per 8.
  EXPECT_DOUBLE_EQ(DataType::parse("icb44fi4_e32s8").bits_per_value(), 4 + 8.0 / 32 + 4.0 / 8);
}

TEST(CodebookNames, BadStringsNameTheProblem) {
  auto err = [](const std::string& s) {
    try {
      DataType::parse(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_NE(err("icb44fx_e4m3fn_e8m0_t32").find("unexpected 'x'"), std::string::npos);
  EXPECT_NE(err("icb44fip_e4m3fn_e8m0_t32").find("power of two"), std::string::npos);
  EXPECT_NE(err("icb44fi_int8_e8m0_t32").find("float format"), std::string::npos);
  EXPECT_NE(err("icb44fi_e4m3fn").find("1-D tile"), std::string::npos);
  EXPECT_NE(err("icb44fi_e4m3fn_e8m0_t32_t32").find("1-D tile"), std::string::npos);
  EXPECT_NE(err("icb44fi_e4m3fn_e8m0_t32n2m4").find("sparsity"), std::string::npos);
  EXPECT_NE(err("cb42_e4m3fn_nosuch_e8m0_t32").find("no tables"), std::string::npos);
  EXPECT_NE(err("icb24fi_e4m3fn_e8m0_t32").find("3, 4 or 5 index bits"), std::string::npos);
  EXPECT_NE(err("icb44f12i_e4m3fn_e8m0_t32").find("one digit"), std::string::npos);
  EXPECT_NE(err("icb44fe5i_e4m3fn_e8m0_t32").find("0 to 3"), std::string::npos);
}

TEST(CodebookNames, EModifierLowersThePatternByBinades) {
  // icb41ie: the int4 pattern and the same pattern one binade lower (values halved).
  const DataType d = DataType::parse("icb41ie_e2m3fnuz_e8m0_t16s2");
  const Codebook& cb = *d.codebook();
  ASSERT_EQ(cb.maps.size(), 2u);
  EXPECT_EQ(cb.names[0], "ie0_0");
  EXPECT_EQ(cb.names[1], "ie1_0");
  // Positions are counted on the number line: one binade lower halves the normal values.
  for (int j = 9; j < 16; ++j)
    if (cb.maps[0][j] >= 2.0) EXPECT_EQ(cb.maps[1][j] * 2, cb.maps[0][j]) << j;
  EXPECT_EQ(cb.maps[1][15], 3.75);
  EXPECT_EQ(DataType::parse("icb42fe0123_e4m3fn_e8m0_t32").codebook()->maps[3][15], 448.0 / 8);
}

TEST(CodebookGeneric, TableFileLoadsAndCasts) {
  // Two mappings of 4-bit indices over e4m3fn: a uniform one and an fp4-like one.
  const std::string good = write_file("cb_test_good.json", R"({
    "codebook": "cb41_e4m3fn_mine",
    "mappings": [
      [-448,-384,-320,-256,-192,-128,-64,-0.0, 0,64,128,192,256,320,384,448],
      [-384,-256,-192,-128,-96,-64,-32,-0.0, 0,32,64,96,128,192,256,384]],
    "names": ["uniform", "fp4"]
  })");
  load_codebook_file(good);
  const DataType d = DataType::parse("cb41_e4m3fn_mine_e8m0_t32s8");
  EXPECT_EQ(d.str(), "cb41_e4m3fn_mine_e8m0_t32s8");
  EXPECT_EQ(DataType::parse(d.str()), d);
  EXPECT_EQ(d.codebook()->names[1], "fp4");
  const Tensor x = gaussian({4, 64}, 7);
  CastOptions o;
  o.device = Device::CPU;
  const Tensor v = cast(x, d, o).values;
  // Every value is an entry of one of the two mappings, times a power of two.
  for (int64_t i = 0; i < v.numel(); ++i) {
    const float f = v.ptr<float>()[i];
    if (f == 0) continue;
    int e;
    const double m = std::frexp(std::fabs(f), &e);
    bool found = false;
    for (const auto& row : d.codebook()->maps)
      for (double entry : row)
        if (entry > 0 && std::frexp(entry, &e) == m) found = true;
    EXPECT_TRUE(found) << i << " " << f;
  }
  auto err = [](const std::string& name, const std::string& text) {
    try {
      load_codebook_file(write_file(name, text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(err("cb_bad1.json", R"({"codebook": "cb41_e4m3fn_b1", "mappings": [[1,2]]})")
                .find("1 mappings, expected 2"),
            std::string::npos);
  const std::string asym =
      R"({"codebook": "cb21_e4m3fn_b2", "mappings": [[-2,-0.0,0,1],[-1,-0.0,0,1]]})";
  EXPECT_NE(err("cb_bad2.json", asym).find("mirror-symmetric"), std::string::npos);
  const std::string unrep =
      R"({"codebook": "cb21_e4m3fn_b3", "mappings": [[-1.1,-0.0,0,1.1],[-1,-0.0,0,1]]})";
  EXPECT_NE(err("cb_bad3.json", unrep).find("'mappings'[0][0]"), std::string::npos);
  EXPECT_NE(err("cb_bad4.json", "{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(
      err("cb_bad5.json", R"({"codebook": "icb41f_e4m3fn", "mappings": []})").find("implicit"),
      std::string::npos);
}

TEST(CodebookModes, ActualAndCompressedUpcastToTheVirtualValues) {
  const uint64_t seed = 0xC0DEB00C;
  for (const char* n : {"icb44fi4_e32", "icb44fi4_e32s8", "icb44fi3_f32s4", "icb44fi2_f32",
                        "icb42p1s2_e4m3fn_e8m0_t16s4", "icb41f_e2m3fnuz_e8m0_t32s2"}) {
    const DataType d = DataType::parse(n);
    // Whole tiles along the last axis, along axis 0, and a short last tile (80 = 2.5 tiles).
    for (int variant = 0; variant < 3; ++variant) {
      const int axis = variant == 1 ? 0 : -1;
      const Shape s = variant == 0 ? Shape{6, 96} : variant == 1 ? Shape{64, 5} : Shape{5, 80};
      Tensor x = gaussian(s, seed + variant);
      CastOptions o;
      o.device = Device::CPU;
      o.axis = axis;
      const Tensor virt = cast(x, d, o).values;
      o.mode = CastMode::Actual;
      const CastResult act = cast(x, d, o);
      o.mode = CastMode::Compress;
      const CastResult cmp = cast(x, d, o);
      EXPECT_EQ(first_diff(upcast(act), virt), -1)
          << n << " variant " << variant << " seed " << seed;
      EXPECT_EQ(first_diff(upcast(cmp), virt), -1)
          << n << " variant " << variant << " seed " << seed;
      const CastResult back = unpack(cmp);
      ASSERT_EQ(back.codes.nbytes(), act.codes.nbytes());
      EXPECT_EQ(std::memcmp(back.codes.data(), act.codes.data(), act.codes.nbytes()), 0) << n;
      EXPECT_EQ(std::memcmp(back.meta.data(), act.meta.data(), act.meta.nbytes()), 0) << n;
      // Packed sizes: 4-bit indices two per byte; meta of M bits in 1/2/4/8-bit slots.
      const Codebook& cb = *d.codebook();
      const int64_t last = s.back(), per = cb.index_bits <= 2 ? 4 : 2;
      EXPECT_EQ(cmp.codes.numel(), act.codes.numel() / last * ((last + per - 1) / per)) << n;
      int mm = 0;
      for (int64_t i = 0; i < act.meta.numel(); ++i)
        mm = std::max<int>(mm, act.meta.ptr<uint8_t>()[i]);
      EXPECT_LT(mm, cb.num_maps()) << n;
    }
  }
}

TEST(CodebookModes, ChoosesTheLeastSquaredErrorMapping) {
  // Tiles built from one mapping's entries choose that mapping (error zero), at any scale.
  const DataType d = DataType::parse("icb44fi4_e32s8");
  const Codebook& cb = *d.codebook();
  std::mt19937_64 rng(20261123);
  Tensor x = Tensor::empty(DType::F32, {16, 32});
  std::vector<int> want(64);
  for (int s = 0; s < 64; ++s) {
    // f_0 / i_0 contain 448, so each tile's scale is pinned by its first subtile.
    const int m = s % 4 == 0 ? (rng() % 2) * 8 : static_cast<int>(rng() % 16);
    want[s] = m;
    const int e = static_cast<int>(s / 4) - 8;
    for (int i = 0; i < 8; ++i) {
      double v = cb.maps[m][8 + 1 + rng() % 7];
      if (i == 0) v = cb.maps[m][15];
      x.mutable_ptr<float>()[s * 8 + i] =
          static_cast<float>((rng() % 2 ? -v : v) * std::ldexp(1.0, e));
    }
  }
  CastOptions o;
  o.device = Device::CPU;
  o.mode = CastMode::Actual;
  const CastResult a = cast(x, d, o);
  const Tensor v = upcast(a);
  EXPECT_EQ(first_diff(v, x), -1);
  for (int s = 0; s < 64; ++s) {
    // Another mapping may hold the same eight values; then the lower index wins (ties: first).
    const int got = a.meta.ptr<uint8_t>()[s];
    EXPECT_LE(got, want[s]) << "subtile " << s;
  }
}

TEST(CodebookModes, NonFiniteTilesDecodeToNaN) {
  const DataType d = DataType::parse("icb44fi4_e32");
  Tensor x = gaussian({2, 32}, 3);
  x.mutable_ptr<float>()[5] = std::nanf("");
  CastOptions o;
  o.device = Device::CPU;
  const CastResult r = cast(x, d, o);
  EXPECT_EQ(r.counts.nonfinite, 1);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(r.values.ptr<float>()[i])) << i;
  for (int i = 32; i < 64; ++i) EXPECT_FALSE(std::isnan(r.values.ptr<float>()[i])) << i;
  o.mode = CastMode::Actual;
  EXPECT_EQ(cast(x, d, o).scale.ptr<uint8_t>()[0], 0xFF);
}
