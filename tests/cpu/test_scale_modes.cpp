// Each exponent-scale selection mode against its defining property, read from the e8m0 scale
// codes of an actual cast.
#include "helpers.hpp"

using namespace cputest;

namespace {

struct TileScales {
  std::vector<int> code;       // e8m0 code per tile
  std::vector<double> absmax;  // tile absmax
  int64_t clipped = 0;
  std::vector<float> values;
};

constexpr int kTile = 32;

// Tiles whose absmax sits in interesting places of the binade: just below 2, around midmax,
// around max, exactly a power of two, random.
std::vector<float> boundary_tiles(const NumberSpec& n, int tiles, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> e(-30, 30);
  const double top = n.max() / std::ldexp(1.0, n.emax());     // max scaled into [1, 2)
  const double mid = n.midmax() / std::ldexp(1.0, n.emax());  // midmax scaled into (1, 2]
  std::vector<float> x(static_cast<size_t>(tiles) * kTile);
  for (int t = 0; t < tiles; ++t) {
    const double cands[] = {1.0,
                            2.0 - std::ldexp(1.0, -(n.mbits() + 1)),  // option3 carry tie
                            std::nextafter(2.0 - std::ldexp(1.0, -(n.mbits() + 1)), 0.0),
                            top,
                            std::nextafter(float(top), 2.0f),
                            mid,
                            std::nextafter(float(mid), 2.0f),
                            std::nextafter(float(mid), 0.0f),
                            1.0 + u(rng),
                            1.0 + u(rng)};
    const double m = cands[t % 10];
    const int ex = e(rng);
    for (int i = 0; i < kTile; ++i)
      x[t * kTile + i] = static_cast<float>(std::ldexp(u(rng) * m, ex) * (i % 3 ? 1 : -1));
    x[t * kTile + (t * 7) % kTile] = static_cast<float>(std::ldexp(m, ex) * (t % 2 ? -1 : 1));
  }
  return x;
}

TileScales run(const std::vector<float>& x, const DataType& d, const char* mode) {
  CastOptions o = cpu_opts(CastMode::Actual);
  o.scale_mode = parse_scale_mode(mode);
  const int64_t tiles = static_cast<int64_t>(x.size()) / kTile;
  const CastResult r = cast(f32(x, {tiles, kTile}), d, o);
  TileScales s;
  EXPECT_EQ(r.scale.dtype(), DType::U8);
  EXPECT_EQ(r.scale.numel(), tiles);
  for (int64_t t = 0; t < tiles; ++t) {
    s.code.push_back(r.scale.ptr<uint8_t>()[t]);
    double a = 0;
    for (int i = 0; i < kTile; ++i) a = std::max(a, std::fabs(double(x[t * kTile + i])));
    s.absmax.push_back(a);
  }
  s.clipped = r.counts.clipped;
  s.values = to_vec(upcast(r));
  return s;
}

int floor_log2(double a) {
  int k;
  std::frexp(a, &k);
  return k - 1;
}

const char* kFloatMx[] = {"e4m3fn_e8m0_t32",   "e5m2_e8m0_t32",     "e2m1fnuz_e8m0_t32",
                          "e3m2fnuz_e8m0_t32", "e2m3fnuz_e8m0_t32", "e4m3b8fnuz_e8m0_t32"};

TEST(ScaleModes, DefiningProperties) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const char* name : kFloatMx) {
    const DataType d = DataType::parse(name);
    const NumberSpec& n = d.number();
    const std::vector<float> x = boundary_tiles(n, 200, rng);
    const TileScales fl = run(x, d, "floor"), ce = run(x, d, "ceil"), mm = run(x, d, "midmax"),
                     o3 = run(x, d, "option3"), tb = run(x, d, "topbinade");
    const double mid = n.midmax() / std::ldexp(1.0, n.emax());
    const double top = n.max() / std::ldexp(1.0, n.emax());
    int carries = 0, ceil_up = 0;
    for (size_t t = 0; t < fl.code.size(); ++t) {
      const double a = fl.absmax[t];
      const int e = floor_log2(a);
      const double frac = a / std::ldexp(1.0, e);
      const std::string at = std::string(name) + " seed=" + std::to_string(seed) + " tile " +
                             std::to_string(t) + " absmax=" + std::to_string(a);
      // floor: the exponent of absmax, shifted so absmax lands in the element's top binade.
      ASSERT_EQ(fl.code[t], e - n.emax() + 127) << at;
      // ceil: never below floor, one above unless absmax is a power of two.
      ASSERT_GE(ce.code[t], fl.code[t]) << at;
      ASSERT_EQ(ce.code[t], fl.code[t] + (frac != 1.0)) << at;
      ceil_up += ce.code[t] != fl.code[t];
      // midmax: ceil exactly when absmax is above midmax scaled into its binade.
      ASSERT_EQ(mm.code[t], fl.code[t] + (frac > mid)) << at;
      // option3: floor unless rounding absmax to the element's precision carries into the next
      // binade (the tie 2 - 2^-(m+1) rounds to even, i.e. up).
      const bool carry = frac >= 2.0 - std::ldexp(1.0, -(n.mbits() + 1));
      ASSERT_EQ(o3.code[t], fl.code[t] + carry) << at;
      carries += carry;
      // topbinade: up exactly when absmax does not fit below max in the floor binade.
      ASSERT_EQ(tb.code[t], fl.code[t] + (frac > top)) << at;
    }
    EXPECT_GT(carries, 0) << name;
    EXPECT_GT(ceil_up, 0) << name;
    // topbinade and ceil never clip; floor does for formats whose max is below the binade top.
    EXPECT_EQ(tb.clipped, 0) << name;
    EXPECT_EQ(ce.clipped, 0) << name;
    // Never clipped: each tile's largest value stays within half an ulp of its own binade.
    for (size_t t = 0; t < tb.code.size(); ++t)
      for (int i = 0; i < kTile; ++i) {
        const size_t k = t * kTile + i;
        if (std::fabs(double(x[k])) != tb.absmax[t]) continue;
        const double half_ulp = std::ldexp(1.0, floor_log2(tb.absmax[t]) - n.mbits() - 1);
        ASSERT_LE(std::fabs(double(tb.values[k]) - double(x[k])), half_ulp)
            << name << " seed=" << seed << " x=" << x[k] << " topbinade=" << tb.values[k];
      }
    EXPECT_GT(fl.clipped, 0) << name << ": floor never clipped, boundary tiles ineffective";
  }
}

// Integer data always uses floor (decision 3), whatever mode is asked for.
TEST(ScaleModes, IntegerDataAlwaysFloor) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const char* name : {"int8_e8m0_t32", "int4_e8m0_t32"}) {
    const DataType d = DataType::parse(name);
    const std::vector<float> x = boundary_tiles(NumberSpec::parse("e4m3fn"), 100, rng);
    const TileScales fl = run(x, d, "floor");
    for (const char* mode : {"ceil", "midmax", "option3", "topbinade"}) {
      const TileScales other = run(x, d, mode);
      EXPECT_EQ(other.code, fl.code) << name << " " << mode << " seed=" << seed;
      for (size_t t = 0; t < fl.code.size(); ++t)
        ASSERT_EQ(fl.code[t], floor_log2(fl.absmax[t]) + 127) << name << " tile " << t;
    }
  }
}

// e8m0 clamping (decision 6): exponents beyond [-127, 127] clamp to codes 0 / 254; an all-zero
// tile gets code 0; a NaN or Inf makes the code 0xFF and the tile NaN.
TEST(ScaleModes, E8M0ClampAndSpecials) {
  const DataType d = DataType::parse("e2m1fnuz_e8m0_t32");
  std::vector<float> x(4 * kTile, 0.0f);
  for (int i = 0; i < kTile; ++i) x[i] = std::ldexp(1.0f, -149 + i % 3);  // tiny: exponent -149
  for (int i = 0; i < kTile; ++i) x[2 * kTile + i] = (i == 5) ? NAN : 1.0f;
  for (int i = 0; i < kTile; ++i) x[3 * kTile + i] = (i == 9) ? -INFINITY : 1e38f;
  const CastResult r = cast(f32(x, {4, kTile}), d, cpu_opts(CastMode::Actual));
  const uint8_t* s = r.scale.ptr<uint8_t>();
  EXPECT_EQ(s[0], 0);  // -149 - 2 + 127 < 0
  EXPECT_EQ(s[1], 0);  // all zero
  EXPECT_EQ(s[2], 0xFF);
  EXPECT_EQ(s[3], 0xFF);
  const std::vector<float> v = to_vec(upcast(r));
  for (int i = 0; i < kTile; ++i) {
    EXPECT_EQ(v[kTile + i], 0.0f);
    EXPECT_TRUE(std::isnan(v[2 * kTile + i])) << i;
    EXPECT_TRUE(std::isnan(v[3 * kTile + i])) << i;
  }
  // Code 254 for the largest exponents: 2^127 - emax(2) + 127 > 254.
  std::vector<float> big(kTile, 3e38f);
  const CastResult rb = cast(f32(big, {1, kTile}), d, cpu_opts(CastMode::Actual));
  EXPECT_EQ(rb.scale.ptr<uint8_t>()[0], 127 - 2 + 127);
  std::vector<float> tiny(kTile, 0x1p-140f);
  const CastResult rt =
      cast(f32(tiny, {1, kTile}), DataType::parse("e4m3fn_e8m0_t32"), cpu_opts(CastMode::Actual));
  EXPECT_EQ(rt.scale.ptr<uint8_t>()[0], 0);  // -140 - 8 + 127 < 0
}

}  // namespace
