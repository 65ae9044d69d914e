// The arithmetic of the plots and image views: nice ticks and their labels, histogram zoom and
// pan, the tile map's fill / zoom / pan / hit test on real tensor shapes, per-tile clipped counts
// and the views' CSV files.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/view_csv.hpp"
#include "test_seed.hpp"

using namespace castscope;
using namespace castscope::widgets;

namespace {

bool is_nice(double step) {
  const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-12));
  return std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

}  // namespace

TEST(PlotMath, TicksAreNiceStepsAndTheCentreOfASymmetricRangeReadsZero) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(-20, 20), frac(0.05, 1.0);
  for (int trial = 0; trial < 2000; ++trial) {
    // Ranges like the histograms': +-1.02 * absmax, and arbitrary [lo, hi].
    const double h = std::ldexp(frac(rng), static_cast<int>(mag(rng)));
    const double lo = trial % 2 ? -h : h * (frac(rng) - 0.9), hi = h;
    const int max_ticks = 2 + trial % 9;
    const Ticks t = linear_ticks(lo, hi, max_ticks);
    ASSERT_TRUE(is_nice(t.step)) << t.step;
    ASSERT_GE(t.values.size(), 2u) << lo << " " << hi;
    ASSERT_LE(t.values.size(), static_cast<size_t>(3 * max_ticks + 1));
    for (size_t i = 0; i < t.values.size(); ++i) {
      EXPECT_GE(t.values[i], lo - t.step * 1e-9);
      EXPECT_LE(t.values[i], hi + t.step * 1e-9);
      // Every tick a whole multiple of the step; a label that parses back to the tick.
      EXPECT_NEAR(t.values[i] / t.step, std::round(t.values[i] / t.step), 1e-9);
      EXPECT_NEAR(std::stod(t.labels[i]), t.values[i], t.step * 1e-6) << t.labels[i];
      if (std::fabs(t.values[i]) < t.step / 2) {
        EXPECT_EQ(t.values[i], 0.0);
        EXPECT_EQ(t.labels[i], "0");
      }
    }
    if (lo < 0 && hi > 0 && trial % 2) {
      // The centre tick of a symmetric range is there and reads 0.
      bool zero = false;
      for (const std::string& l : t.labels) zero = zero || l == "0";
      EXPECT_TRUE(zero) << lo << " " << hi;
    }
  }
}

TEST(PlotMath, TickLabelsCarryTheStepsPrecision) {
  EXPECT_EQ(tick_label(-5.55e-17, 0.1), "0");
  EXPECT_EQ(tick_label(6.94e-18, 0.05), "0");
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(0.3, 0.1), "0.3");
  EXPECT_EQ(tick_label(-2, 1), "-2");
  EXPECT_EQ(tick_label(20, 10), "20");
  EXPECT_EQ(tick_label(3e-5, 1e-5), "3e-05");
  EXPECT_EQ(tick_label(1.5e-4, 5e-5), "1.5e-04");
  EXPECT_EQ(tick_label(2e6, 1e6), "2e+06");
  // The three-tick rule: [-0.49, 0.49] gets -0.4 .. 0.4, not 0 alone.
  const Ticks t = linear_ticks(-0.494, 0.494, 4);
  EXPECT_GE(t.values.size(), 3u);
  // No endless loop where the steps are below the magnitude's precision.
  EXPECT_LE(linear_ticks(1e20, 1e20 + 1e5, 5).values.size(), 7u);
  EXPECT_TRUE(linear_ticks(1, 1, 5).values.empty());
  EXPECT_EQ(count_label(950), "950");
  EXPECT_EQ(count_label(12000), "12k");
  EXPECT_EQ(count_label(3.5e6), "3.5M");
}

TEST(PlotMath, LogCountTicksArePowersOfTen) {
  const Ticks t = log_count_ticks(123456, 10);
  ASSERT_EQ(t.values.size(), 7u);  // 0, 1, 10, ..., 100k
  EXPECT_EQ(t.labels.front(), "0");
  EXPECT_EQ(t.labels[1], "1");
  EXPECT_EQ(t.labels.back(), "100k");
  const Ticks few = log_count_ticks(1e9, 4);  // every third decade
  EXPECT_LE(few.values.size(), 5u);
  for (size_t i = 1; i < few.values.size(); ++i)
    EXPECT_EQ(few.values[i], std::pow(10.0, std::round(std::log10(few.values[i]))));
}

TEST(PlotMath, HistogramZoomKeepsTheAnchorAndStaysInsideTheData) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    AxisView v;
    const double lo = -10 * u(rng) - 0.1, hi = 10 * u(rng) + 0.1;
    axis_fit(v, lo, hi);
    EXPECT_FALSE(v.zoomed());
    const double anchor = lo + (hi - lo) * u(rng);
    const double f = (v.hi - v.lo) > 0 ? (anchor - v.lo) / (v.hi - v.lo) : 0;
    axis_zoom(v, anchor, 1.25 * 1.25);
    EXPECT_TRUE(v.zoomed());
    EXPECT_NEAR(v.hi - v.lo, (hi - lo) / 1.5625, 1e-9 * (hi - lo));
    EXPECT_GE(v.lo, lo);
    EXPECT_LE(v.hi, hi + 1e-12);
    // The anchor stays under the mouse unless the range had to be pushed back inside.
    if (v.lo > lo && v.hi < hi) EXPECT_NEAR((anchor - v.lo) / (v.hi - v.lo), f, 1e-9);
    const double span = v.hi - v.lo;
    axis_pan(v, -1e9);
    EXPECT_EQ(v.lo, lo);
    EXPECT_NEAR(v.hi - v.lo, span, 1e-9 * span);
    for (int i = 0; i < 100; ++i) axis_zoom(v, anchor, 4);
    EXPECT_NEAR(v.hi - v.lo, (hi - lo) / 4096, 1e-9 * (hi - lo));
    axis_fit(v, lo, hi);  // same data: the zoom is kept
    EXPECT_TRUE(v.zoomed());
    axis_fit(v, lo, hi + 1);  // other data: the whole range again
    EXPECT_FALSE(v.zoomed());
  }
}

// The shapes the tile map must show: [120, 6625], [6625, 120], [8192, 8192] at 1 x 32 tiles,
// 2-D tiles of 16 x 16, and one scale per row (per channel).
struct Layout {
  int64_t R, C, tr, tc;
};
const Layout kLayouts[] = {{120, 6625, 1, 32},   {6625, 120, 1, 32},   {8192, 8192, 1, 32},
                           {8192, 8192, 16, 16}, {120, 6625, 1, 6625}, {6625, 120, 1, 120}};

GridGeom geom_of(const Layout& l, float w, float h) {
  GridGeom g;
  g.cell_rows = l.tr;
  g.cell_cols = l.tc;
  g.rows = (l.R + l.tr - 1) / l.tr;
  g.cols = (l.C + l.tc - 1) / l.tc;
  g.elem_rows = l.R;
  g.elem_cols = l.C;
  g.width = w;
  g.height = h;
  return g;
}

TEST(PlotMath, TileMapFillsThePanelAndZoomsToSingleElementsOnEveryShape) {
  for (const Layout& l : kLayouts) {
    for (auto [w, h] :
         {std::pair{520.f, 210.f}, std::pair{900.f, 420.f}, std::pair{180.f, 500.f}}) {
      SCOPED_TRACE(std::to_string(l.R) + "x" + std::to_string(l.C) + " tiles " +
                   std::to_string(l.tr) + "x" + std::to_string(l.tc) + " in " + std::to_string(w) +
                   "x" + std::to_string(h));
      const GridGeom g = geom_of(l, w, h);
      GridView v;
      // Zoom 1: the whole grid spans the whole panel on both axes (no strip).
      float x0, y0, x1, y1;
      grid_to_pixels(v, g, 0, 0, &x0, &y0);
      grid_to_pixels(v, g, static_cast<double>(g.cols), static_cast<double>(g.rows), &x1, &y1);
      EXPECT_FLOAT_EQ(x0, 0);
      EXPECT_FLOAT_EQ(y0, 0);
      EXPECT_NEAR(x1, w, 1e-3);
      EXPECT_NEAR(y1, h, 1e-3);
      // Wheel steps at one spot until nothing changes: both axes reach the element level.
      const float mx = w * 0.37f, my = h * 0.61f;
      double col0, row0;
      grid_to_cells(v, g, mx, my, &col0, &row0);
      for (int i = 0; i < 200; ++i) {
        grid_zoom(v, g, mx, my, 1.25);
        double col, row;
        grid_to_cells(v, g, mx, my, &col, &row);
        // The spot under the mouse stays there (until the view meets the grid's edge).
        if (v.u0 > 0 && v.u0 < 1 - 1 / v.zx) ASSERT_NEAR(col, col0, 1e-6 * g.cols);
        if (v.v0 > 0 && v.v0 < 1 - 1 / v.zy) ASSERT_NEAR(row, row0, 1e-6 * g.rows);
      }
      EXPECT_NEAR(grid_element_px_x(v, g), std::max(kElementPx, w / double(g.cols * l.tc)), 1e-6);
      EXPECT_NEAR(grid_element_px_y(v, g), std::max(kElementPx, h / double(g.rows * l.tr)), 1e-6);
      // Hit test at the element level: the element under the mouse is the one drawn there.
      const auto hit = grid_hit(v, g, mx, my);
      ASSERT_TRUE(hit.has_value());
      EXPECT_EQ(hit->row, hit->elem_row / l.tr);
      EXPECT_EQ(hit->col, hit->elem_col / l.tc);
      float ex, ey;
      grid_to_pixels(v, g, static_cast<double>(hit->elem_col) / l.tc,
                     static_cast<double>(hit->elem_row) / l.tr, &ex, &ey);
      EXPECT_LE(ex, mx);
      EXPECT_GT(ex + grid_element_px_x(v, g), mx);
      EXPECT_LE(ey, my);
      EXPECT_GT(ey + grid_element_px_y(v, g), my);
      // Dragging moves the grid with the mouse, and stops at its edges.
      const double u0 = v.u0;
      grid_pan(v, g, -10, 0);
      if (u0 < 1 - 1 / v.zx - 1e-9)
        EXPECT_NEAR((v.u0 - u0) * v.zx * w, 10, 1e-3 + (1 - 1 / v.zx - v.u0) * v.zx * w);
      grid_pan(v, g, 1e9f, 1e9f);
      EXPECT_EQ(v.u0, 0);
      EXPECT_EQ(v.v0, 0);
      EXPECT_FALSE(grid_hit(v, g, -1, 5).has_value());
      EXPECT_FALSE(grid_hit(v, g, 5, h).has_value());
    }
  }
}

TEST(PlotMath, HitTestFindsEveryTileAtZoomOne) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const Layout& l : kLayouts) {
    const GridGeom g = geom_of(l, 640, 320);
    const GridView v;
    std::uniform_int_distribution<int64_t> rr(0, g.rows - 1), cc(0, g.cols - 1);
    for (int i = 0; i < 200; ++i) {
      const int64_t r = rr(rng), c = cc(rng);
      float x0, y0, x1, y1;
      grid_to_pixels(v, g, static_cast<double>(c), static_cast<double>(r), &x0, &y0);
      grid_to_pixels(v, g, c + 1.0, r + 1.0, &x1, &y1);
      const auto hit = grid_hit(v, g, (x0 + x1) / 2, (y0 + y1) / 2);
      // Every tile is hit at its centre; the centre lies past the elements only in the partial
      // last tiles, which then name no element.
      ASSERT_TRUE(hit.has_value()) << r << "," << c;
      EXPECT_EQ(hit->row, r);
      EXPECT_EQ(hit->col, c);
      if (hit->elem_row < 0 || hit->elem_col < 0) {
        EXPECT_TRUE(r == g.rows - 1 || c == g.cols - 1);
        EXPECT_TRUE((c + 0.5) * l.tc >= l.C || (r + 0.5) * l.tr >= l.R);
        continue;
      }
      EXPECT_GE(hit->elem_row, r * l.tr);
      EXPECT_LT(hit->elem_row, std::min(l.R, (r + 1) * l.tr));
      EXPECT_GE(hit->elem_col, c * l.tc);
      EXPECT_LT(hit->elem_col, std::min(l.C, (c + 1) * l.tc));
    }
  }
}

namespace {

Tensor outlier_tensor(uint64_t seed, Shape shape) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0, 1);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x = Tensor::empty(DType::F32, shape);
  float* p = x.mutable_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = n(rng) * (u(rng) < 0.02f ? 30.0f : 1.0f);
  return x;
}

// The analysis of these tests runs on the host: the same on any machine.
AnalysisOptions on_the_host() {
  AnalysisOptions ao;
  ao.device = false;
  return ao;
}

}  // namespace

TEST(PlotMath, PerTileClippedCountsAddUpToTheCastsTotal) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = outlier_tensor(seed, {96, 200});
  AnalysisOptions ao = on_the_host();
  // Counted exactly where the element scale is a power of two or a float scale alone.
  for (const char* d :
       {"mxfp4e2", "mxfp6e2", "mxfp8e4", "e2m1_e4m3_t16", "int4_e8m0_t32", "nvfp4", "mxint8"}) {
    SCOPED_TRACE(d);
    auto a = analyze(x, DataType::parse(d), {}, "t", ao);
    ASSERT_TRUE(a->tiles.has_value());
    ASSERT_EQ(a->tile_clipped.size(), a->tiles->scale_value.size()) << a->tile_clipped_note;
    int64_t total = 0, tiles_with = 0;
    for (int64_t c : a->tile_clipped) total += c, tiles_with += c > 0;
    EXPECT_EQ(total, a->stats.clipped);
    // The clipped elements sit in tiles holding the outliers, not spread evenly.
    if (total) EXPECT_LT(tiles_with, static_cast<int64_t>(a->tile_clipped.size()));
  }
  // Scales that do not allow it say why instead of showing a wrong count.
  CastOptions st;
  st.round = Round::Stochastic;
  auto s = analyze(x, DataType::parse("mxfp4e2"), st, "t", ao);
  EXPECT_TRUE(s->tile_clipped.empty());
  EXPECT_FALSE(s->tile_clipped_note.empty());
}

TEST(PlotMath, EveryViewSavesAsCsv) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor x = outlier_tensor(seed, {64, 96});
  AnalysisOptions ao = on_the_host();
  ao.bins = 40;
  auto a = analyze(x, DataType::parse("mxfp4e2"), {}, "t", ao);
  auto b = analyze(x, DataType::parse("nvfp4"), {}, "t", ao);

  const std::string v = value_histogram_csv(*a, b.get(), false);
  EXPECT_EQ(lines(v), 41u);
  EXPECT_EQ(v.substr(0, v.find('\n')), "bin_lo,bin_hi,original,cast,cast_" + b->dtype.str());
  uint64_t orig = 0, cast = 0;
  std::stringstream vs(v);
  std::string line;
  std::getline(vs, line);
  while (std::getline(vs, line)) {
    const auto f = split(line);
    ASSERT_EQ(f.size(), 5u);
    orig += std::stoull(f[2]);
    cast += std::stoull(f[3]);
  }
  uint64_t want = 0, want_cast = 0;
  for (uint64_t c : a->value_orig.counts) want += c;
  for (uint64_t c : a->value_cast.counts) want_cast += c;  // a cast may round past the range
  EXPECT_EQ(orig, want);
  EXPECT_EQ(orig, static_cast<uint64_t>(x.numel()));
  EXPECT_EQ(cast, want_cast);

  const std::string e = exponent_histogram_csv(*a, b.get());
  const int lo = std::min(a->exp_lo, b->exp_lo), hi = std::max(a->exp_hi, b->exp_hi);
  EXPECT_EQ(lines(e), static_cast<size_t>(hi - lo + 1 + 2));  // header, binades, zeros
  EXPECT_NE(e.find("\nzero,0,"), std::string::npos);

  const std::string err = error_histogram_csv(*a, nullptr);
  EXPECT_EQ(lines(err), 41u);

  const std::string t = tile_map_csv(*a);
  ASSERT_TRUE(a->tiles.has_value());
  EXPECT_EQ(lines(t), static_cast<size_t>(a->tiles->rows * a->tiles->cols + 1));
  std::stringstream ts(t);
  std::getline(ts, line);
  int64_t clipped = 0;
  while (std::getline(ts, line)) {
    const auto f = split(line);
    ASSERT_EQ(f.size(), 13u) << line;
    EXPECT_LE(std::stoll(f[6]), 95);  // col_last inside the tensor
    clipped += std::stoll(f[12]);
  }
  EXPECT_EQ(clipped, a->stats.clipped);

  const std::string m = mask_csv(*a);
  EXPECT_EQ(lines(m), static_cast<size_t>(a->mask.out_rows * a->mask.out_cols + 1));
  // An unscaled datatype has no tile map: the header alone.
  auto u = analyze(x, DataType::parse("bfloat16"), {}, "t", ao);
  EXPECT_EQ(lines(tile_map_csv(*u)), 1u);
}
