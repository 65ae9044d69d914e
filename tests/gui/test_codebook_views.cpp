// Codebook datatypes in the views: the tile map's mapping choices (what the heatmap colours and
// the teaching view marks) and the composer's codebook fields.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/composer.hpp"
#include "castscope/widgets/heatmap.hpp"

using namespace castscope;
using namespace castscope::widgets;

TEST(CodebookViews, TileMapHoldsEachSubtilesMapping) {
  const uint64_t seed = 97531;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  Tensor x = Tensor::empty(DType::F32, {24, 64});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.mutable_ptr<float>()[i] = nd(rng) * static_cast<float>(1 + (i / 64) % 5);
  const DataType d = DataType::parse("icb44fi4_e32s8");
  CastOptions o;
  o.device = Device::CPU;
  const auto a = analyze(x, d, o, "x");
  ASSERT_TRUE(a->tiles) << a->tiles_note;
  const TileMap& m = *a->tiles;
  ASSERT_EQ(m.rows * m.cols, 48);
  ASSERT_EQ(m.subs_per_tile, 4);
  ASSERT_EQ(m.sub_mapping.size(), 48u * 4);
  ASSERT_EQ(m.mapping.size(), 48u);
  // The subtile choices are those of the cast's meta tensor, in tile order.
  o.mode = CastMode::Actual;
  const CastResult r = cast(x, d, o);
  for (size_t i = 0; i < m.sub_mapping.size(); ++i)
    EXPECT_EQ(m.sub_mapping[i], r.meta.ptr<uint8_t>()[i]) << i << " seed " << seed;
  std::set<int> used;
  for (size_t k = 0; k < m.mapping.size(); ++k) {
    // The tile's mapping is one that most of its subtiles chose.
    int count = 0, best = 0;
    for (int j = 0; j < 4; ++j) count += m.sub_mapping[k * 4 + j] == m.mapping[k];
    for (int c = 0; c < 16; ++c) {
      int n = 0;
      for (int j = 0; j < 4; ++j) n += m.sub_mapping[k * 4 + j] == c;
      best = std::max(best, n);
    }
    EXPECT_EQ(count, best) << "tile " << k;
    EXPECT_EQ(heat_value(m, HeatField::Mapping, k), m.mapping[k]);
    used.insert(m.mapping[k]);
  }
  EXPECT_GT(used.size(), 2u) << "seed " << seed;
  EXPECT_NE(mapping_colour(0), mapping_colour(1));
}

TEST(CodebookViews, ComposerFieldsRoundTrip) {
  ComposerState s;
  ASSERT_TRUE(s.set_text("icb44fi2_f32s4"));
  EXPECT_TRUE(s.codebook);
  EXPECT_EQ(s.fields_string(), "icb44fi_e2m3fnuz_e5m3_t32s4");
  EXPECT_EQ(DataType::parse(s.fields_string()), s.dtype);
  s.cb_meta = 2;
  std::snprintf(s.cb_clauses, sizeof s.cb_clauses, "p1s2");
  s.sub = 0;
  EXPECT_EQ(s.fields_string(), "icb42p1s2_e2m3fnuz_e5m3_t32");
  EXPECT_EQ(DataType::parse(s.fields_string()).codebook()->maps.size(), 4u);
  ASSERT_TRUE(s.set_text("mxfp4e2"));
  EXPECT_FALSE(s.codebook);
}
