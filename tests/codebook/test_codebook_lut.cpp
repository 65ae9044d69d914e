// The interval tables of the codebook kernels against nearest_slot: for every mapping, the slot
// and magnitude a table row gives must be the ones the midpoint search finds, on every midpoint,
// its float and double neighbours, and random magnitudes over the whole range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "castscope/codebook.hpp"
#include "families/codebook/cb_cast.hpp"
#include "families/codebook/cb_lut.hpp"
#include "test_seed.hpp"

using namespace castscope;

namespace {

void expect_rows_match(const codebook::Layout& l, const char* name, int max_steps, uint64_t seed) {
  const detail::cb::Params p = l.params();
  const detail::cb::Lut t = detail::cb::build_lut(p);
  ASSERT_TRUE(t.ok) << name << ": " << t.why;
  ASSERT_EQ(t.bucket.size(), (static_cast<size_t>(t.ix.octaves + 1) << t.ix.sub_bits) + 1);
  ASSERT_LE(t.bucket.size(), static_cast<size_t>(detail::cb::kMaxBuckets));
  // Midpoints of few bits are bucket lower ends: the bucket alone gives the interval.
  EXPECT_EQ(t.ix.max_steps, max_steps) << name << " sub_bits " << t.ix.sub_bits;
  std::vector<double> probes = {0.0, 1e-300, 4.9e-324, 1e300};
  for (double th : t.thr)
    for (double v :
         {th, std::nextafter(th, 0.0), std::nextafter(th, 1e308),
          static_cast<double>(std::nextafter(static_cast<float>(th), 0.0f)),
          static_cast<double>(std::nextafter(static_cast<float>(th), 1e30f)), th * 0.5, th * 2})
      probes.push_back(v);
  std::mt19937_64 rng(seed);
  const double top = t.thr.empty() ? 1.0 : t.thr.back() * 1.5;
  std::uniform_real_distribution<double> u(0.0, top);
  std::uniform_int_distribution<int> e(-60, 20);
  for (int i = 0; i < 20000; ++i) probes.push_back(i % 2 ? u(rng) : std::ldexp(u(rng), e(rng)));
  for (double a : probes) {
    const int k = detail::cb::interval_of(t.thr.data(), t.bucket.data(), t.ix, a);
    ASSERT_GE(k, 0);
    ASSERT_LE(k, t.ix.nthr);
    ASSERT_EQ(detail::cb::interval_steps(t, a), k) << name << " a " << a << " seed " << seed;
    for (int m = 0; m < p.nmaps; ++m) {
      const double* mag = p.mags + m * p.half;
      const int want = detail::cb::nearest_slot(mag, p.half, a);
      ASSERT_EQ(t.slot[k * t.width + m], want)
          << name << " mapping " << m << " a " << a << " interval " << k << " seed " << seed;
      ASSERT_EQ(static_cast<uint64_t>(t.hi16[k * t.row_groups * 8 + m]) << 48,
                scalar::double_bits(mag[want]))
          << name << " mapping " << m << " a " << a;
      // The tie masks: bit n of (k, m) exactly when mappings n and m give a the same magnitude.
      for (int n = 0; n < p.nmaps; ++n) {
        const double other =
            p.mags[n * p.half + detail::cb::nearest_slot(p.mags + n * p.half, p.half, a)];
        const bool eq = scalar::double_bits(other) == scalar::double_bits(mag[want]);
        ASSERT_EQ(((t.same[k * t.width + m] >> n) & 1) != 0, eq)
            << name << " mappings " << m << ", " << n << " a " << a;
      }
    }
  }
}

TEST(CodebookLut, RowsGiveEveryMappingsNearestSlot) {
  const uint64_t seed = test::test_seed();
  const std::string table = std::string(CASTSCOPE_BINARY_DIR) + "/cb_lut_table.json";
  // Unsorted and overlapping mappings: midpoints shared between mappings and out of order.
  std::ofstream(table) << R"({"codebook": "cb22_e2m3fnuz_luttest", "mappings": [
      [-6,-0.0,0,6], [-7.5,-0.0,0,7.5], [-3,-0.0,0,3], [-0.5,-0.0,0,0.5]]})";
  load_codebook_file(table);
  // Magnitudes 29 octaves apart: a midpoint with 29 fraction bits, more than the bucket table
  // resolves over 31 octaves, so a comparison step follows the bucket.
  std::ofstream(table) << R"({"codebook": "cb31_e5m2_lutwide", "mappings": [
      [-40960,-32768,-0.00006103515625,-0.0,0,0.00006103515625,32768,40960],
      [-4,-1,-0.5,-0.0,0,0.5,1,4]]})";
  load_codebook_file(table);
  const char* names[] = {"icb44fi4_e32",
                         "icb44fi4_f32s8",
                         "icb44fi3_e32s8",
                         "icb44fi2_f32",
                         "icb42p1s2_e4m3fn_e8m0_t64s16",
                         "icb41ie_e2m3fnuz_e8m0_t16s2",
                         "icb44fi_e5m2_float16_t32s8",
                         "cb22_e2m3fnuz_luttest_e8m0_t32s4",
                         "cb31_e5m2_lutwide_e8m0_t32s8"};
  for (const char* name : names) {
    CastOptions o;
    const bool wide = std::string(name).find("wide") != std::string::npos;
    expect_rows_match(codebook::make_layout({4, 64}, DataType::parse(name), o), name, wide ? 1 : 0,
                      seed);
  }
}

// Random tiles (wide exponent range, zeros of both signs, subnormals, NaN / Inf, elements on the
// midpoints, short tiles at the end of a row) through encode_tile and encode_tile_lut: the same
// scale code, counts, mapping choices, codes and values.
TEST(CodebookLut, TileEncodingEqualsEncodeTile) {
  const uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::uniform_int_distribution<int> pick(0, 99), ex(-30, 30);
  const char* names[] = {"icb44fi4_e32",
                         "icb44fi4_f32s8",
                         "icb44fi3_e32s4",
                         "icb44fi2_f32s16",
                         "icb42p1s2_e4m3fn_e8m0_t64s16",
                         "icb41ie_e2m3fnuz_e8m0_t16s2",
                         "icb44fi_e5m2_float16_t32s8"};
  for (const char* name : names)
    for (ScaleMode sm : {ScaleMode::Floor, ScaleMode::Midmax, ScaleMode::Ceil}) {
      CastOptions o;
      o.scale_mode = sm;
      const codebook::Layout l = codebook::make_layout({4, 64}, DataType::parse(name), o);
      const detail::cb::Params p = l.params();
      const detail::cb::Lut t = detail::cb::build_lut(p);
      ASSERT_TRUE(t.ok) << name << ": " << t.why;
      const int tile = l.tile, metas = tile / l.sub;
      std::vector<double> x(tile);
      std::vector<uint8_t> c1(tile), c2(tile), m1(metas), m2(metas), kb(tile);
      std::vector<float> v1(tile), v2(tile);
      for (int trial = 0; trial < 400; ++trial) {
        const int n = trial % 5 == 4 ? 1 + static_cast<int>(rng() % tile) : tile;
        const double spread = std::ldexp(1.0, ex(rng));
        for (int i = 0; i < n; ++i) {
          const int k = pick(rng);
          double v = nd(rng) * spread * std::ldexp(1.0, static_cast<int>(rng() % 9) - 4);
          if (k < 5 && !t.thr.empty()) v = t.thr[rng() % t.thr.size()] * spread;
          if (k == 5) v = trial % 7 == 0 ? std::numeric_limits<double>::quiet_NaN() : 0.0;
          if (k == 6) v = trial % 11 == 0 ? -std::numeric_limits<double>::infinity() : -0.0;
          if (k == 7) v = std::ldexp(1.0 + (rng() % 8), -145);
          x[i] = static_cast<float>(v);
        }
        if (trial % 13 == 0) std::fill(x.begin(), x.begin() + n, trial % 2 ? 0.0 : -0.0);
        std::fill(m1.begin(), m1.end(), 0xAA);
        std::fill(m2.begin(), m2.end(), 0xAA);
        for (bool codes : {true, false}) {
          const auto a =
              detail::cb::encode_tile(p, x.data(), n, metas, 0, 0, codes ? c1.data() : nullptr,
                                      codes ? nullptr : v1.data(), m1.data());
          const auto b = detail::cb::encode_tile_lut(
              p, t, x.data(), n, metas, 0, 0, codes ? c2.data() : nullptr,
              codes ? nullptr : v2.data(), m2.data(), kb.data());
          const std::string at = std::string(name) + " " + to_string(sm) + " trial " +
                                 std::to_string(trial) + " seed " + std::to_string(seed);
          ASSERT_EQ(a.scale_code, b.scale_code) << at;
          ASSERT_EQ(a.clipped, b.clipped) << at;
          ASSERT_EQ(a.nonfinite, b.nonfinite) << at;
          ASSERT_EQ(m1, m2) << at;
          if (codes)
            ASSERT_EQ(std::vector<uint8_t>(c1.begin(), c1.begin() + n),
                      std::vector<uint8_t>(c2.begin(), c2.begin() + n))
                << at;
          else
            ASSERT_EQ(std::memcmp(v1.data(), v2.data(), n * sizeof(float)), 0) << at;
        }
      }
    }
}

TEST(CodebookLut, MagnitudesOfMoreThanFiveSignificantBitsAreRefused) {
  codebook::Layout l = codebook::make_layout({4, 64}, DataType::parse("icb44fi4_e32"), {});
  l.mags[3] = 1.0 + std::ldexp(1.0, -5);  // six significant bits
  const detail::cb::Lut t = detail::cb::build_lut(l.params());
  EXPECT_FALSE(t.ok);
  EXPECT_NE(std::string(t.why).find("significant bits"), std::string::npos);
}

}  // namespace
