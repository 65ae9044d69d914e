// Quantization axes: the settings users write, the default rule, and flattened casts, which must
// equal the cast of the reshaped view [O, I*kh*kw] bit for bit in every mode.
#include "castscope/layout.hpp"
#include "castscope/metrics.hpp"
#include "helpers.hpp"

using namespace cputest;

namespace {

Shape view_of(const Shape& s) {
  return {s[0], numel(s) / s[0]};
}

void expect_same_parts(const CastResult& got, const CastResult& want, const std::string& what) {
  EXPECT_TRUE(same_bytes(got.codes, want.codes)) << what << ": codes";
  EXPECT_TRUE(same_bytes(got.scale, want.scale)) << what << ": scale";
  EXPECT_TRUE(same_bytes(got.tenscale, want.tenscale)) << what << ": tenscale";
  EXPECT_TRUE(same_bytes(got.meta, want.meta)) << what << ": meta";
  EXPECT_TRUE(same_bytes(got.residual, want.residual)) << what << ": residual";
}

}  // namespace

TEST(Axis, SpecTextRoundTrip) {
  for (const char* s : {"auto", "-1", "0", "1:", "-3:", "2"})
    EXPECT_EQ(AxisSpec::parse(s).str(), s);
  EXPECT_TRUE(AxisSpec::parse("auto").automatic);
  EXPECT_TRUE(AxisSpec::parse("1:").flatten);
  EXPECT_EQ(AxisSpec::parse("1:").axis, 1);
  for (const char* bad : {"", ":", "x", "1::", "1.5", "auto:", "99"})
    EXPECT_THROW(AxisSpec::parse(bad), Error) << bad;
}

TEST(Axis, DefaultRule) {
  EXPECT_EQ(default_axis({64, 3, 7, 7}).str(), "1:");
  EXPECT_EQ(default_axis({8, 4, 3, 3, 3}).str(), "1:");
  EXPECT_EQ(default_axis({4096, 11008}).str(), "-1");
  EXPECT_EQ(default_axis({8, 1024, 512}).str(), "-1");  // stacked experts [E, out, in]
  EXPECT_EQ(default_axis({4096}).str(), "-1");
  CastOptions o;
  o.axis_auto = true;
  EXPECT_EQ(describe_axis(o, {64, 3, 7, 7}), "1..3:147");
  EXPECT_EQ(describe_axis(o, {256, 128}), "-1:128");
  EXPECT_EQ(axis_length(o, {256, 128, 3, 3}), 1152);
  // Flattening the last axis alone merges nothing and is the plain last axis.
  AxisSpec::parse("3:").apply(o);
  const CastOptions r = resolve_axis(o, {4, 4, 4, 32});
  EXPECT_FALSE(r.flatten);
  EXPECT_EQ(r.axis, 3);
  AxisSpec::parse("4:").apply(o);
  EXPECT_THROW(resolve_axis(o, {4, 4, 4, 32}), Error);
}

// A conv weight cast over I*kh*kw with the default MX datatype (t32 tiles) is the cast of its
// [O, I*kh*kw] view: same values, same codes and scales, in every mode.
TEST(Axis, ConvWeightEqualsReshapedView) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::vector<Shape> shapes = {{64, 3, 7, 7}, {256, 128, 3, 3}, {6, 5, 3, 3, 3}};
  const char* dtypes[] = {
      "mxfp8e4",          "nvfp4", "e4m3fn_float32_t0", "e4m3fn_float32_t128_t128",
      "mxfp4e2",          "mx6",   "int4_float16_t64",  "tcfp12",
      "e2m1_e8m0_t32n2m4"};
  for (const Shape& s : shapes)
    for (const char* name : dtypes) {
      const DataType d = DataType::parse(name);
      const Tensor x = f32(mixed(numel(s), rng), s);
      const Tensor xv = x.reshaped(view_of(s));
      for (CastMode mode : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
        const std::string what = std::string(name) + " " + shape_str(s) + " " + to_string(mode) +
                                 " (seed " + std::to_string(seed) + ")";
        CastOptions o = cpu_opts();
        o.mode = mode;
        o.axis_auto = true;
        const CastResult got = cast(x, d, o);
        CastOptions ov = cpu_opts();
        ov.mode = mode;
        const CastResult want = cast(xv, d, ov);
        EXPECT_EQ(got.shape, s) << what;
        EXPECT_TRUE(got.options.flatten) << what;
        EXPECT_EQ(got.options.axis, 1) << what;
        EXPECT_FALSE(got.options.axis_auto) << what;
        const Tensor g = upcast(got), w = upcast(want);
        ASSERT_EQ(g.shape(), s) << what;
        EXPECT_EQ(first_diff(g, w), -1) << what;
        if (mode != CastMode::Virtual) {
          expect_same_parts(got, want, what);
          EXPECT_EQ(first_diff(upcast(unpack(pack(got))), w), -1) << what;
        }
      }
    }
}

TEST(Axis, FlattenedRotationAndTileMap) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const Shape s = {32, 16, 3, 3};  // I*kh*kw = 144 = 9 blocks of 16
  const Tensor x = f32(mixed(numel(s), rng), s);
  const DataType d = DataType::parse("mxfp4e2");
  CastOptions o = cpu_opts();
  AxisSpec::parse("1:").apply(o);
  o.rotate = parse_rotation("h16r5");
  CastOptions ov = cpu_opts();
  ov.rotate = o.rotate;
  const Tensor want = cast(x.reshaped({32, 144}), d, ov).values;
  EXPECT_EQ(first_diff(cast(x, d, o).values, want), -1) << "seed " << seed;
  o.mode = ov.mode = CastMode::Compress;
  EXPECT_EQ(first_diff(upcast(cast(x, d, o)), want), -1) << "seed " << seed;
  // The tile map of a flattened cast is that of the view: 32 rows of ceil(144 / 32) tiles.
  CastOptions a = cpu_opts();
  a.mode = CastMode::Actual;
  a.axis_auto = true;
  const CastResult r = cast(x, d, a);
  const TileMap m = tile_map(x, upcast(r), r);
  EXPECT_EQ(m.rows, 32);
  EXPECT_EQ(m.cols, 5);
}

TEST(Axis, LinearAndExpertsKeepTheLastAxis) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const Shape& s : {Shape{48, 96}, Shape{2, 32, 64}}) {
    const Tensor x = f32(mixed(numel(s), rng), s);
    CastOptions o = cpu_opts();
    o.axis_auto = true;
    const CastResult r = cast(x, DataType::parse("mxfp8e4"), o);
    EXPECT_FALSE(r.options.flatten);
    EXPECT_EQ(first_diff(r.values, cast(x, DataType::parse("mxfp8e4"), cpu_opts()).values), -1)
        << shape_str(s) << " seed " << seed;
  }
}

// The leading form ":A" (a Keras kernel [kh, kw, Cin, Cout] reduces over kh*kw*Cin; a
// ConvTranspose weight [Cin, Cout/g, kh, kw] over Cin) is the cast of the view
// [prod(shape[..A]), prod(shape[A+1..])] along axis 0, in every mode.
TEST(Axis, LeadingFlattenEqualsViewAlongAxisZero) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  EXPECT_EQ(AxisSpec::parse(":2").str(), ":2");
  EXPECT_TRUE(AxisSpec::parse(":2").lead);
  EXPECT_THROW(AxisSpec::parse(":"), Error);
  EXPECT_THROW(AxisSpec::parse(":1:"), Error);
  CastOptions r;
  AxisSpec::parse(":0").apply(r);
  EXPECT_FALSE(resolve_axis(r, {64, 32}).flatten);  // the view is the tensor: plain axis 0
  EXPECT_EQ(resolve_axis(r, {64, 32}).axis, 0);
  AxisSpec::parse(":2").apply(r);
  EXPECT_EQ(describe_axis(r, {3, 3, 16, 24}), "0..2:144");
  // Axes 0 to 0 are axis 0 alone: a ConvTranspose weight over its 16 input channels.
  AxisSpec::parse(":0").apply(r);
  EXPECT_EQ(describe_axis(r, {16, 8, 3, 3}), "0:16");
  AxisSpec::parse(":2").apply(r);
  EXPECT_EQ(cast_view_shape({3, 3, 16, 24}, resolve_axis(r, {3, 3, 16, 24})), (Shape{144, 24}));
  EXPECT_EQ(layout_view({3, 3, 16, 24}, AxisSpec::parse(":2")), (Shape{24, 144}));
  EXPECT_EQ(layout_view({16, 8, 3, 3}, AxisSpec::parse(":0")), (Shape{72, 16}));
  EXPECT_EQ(layout_view({16, 8, 3, 3}, AxisSpec::parse("1:")), (Shape{16, 72}));
  EXPECT_EQ(layout_view({120, 6625}, AxisSpec::parse("0")), (Shape{6625, 120}));
  const std::vector<std::pair<Shape, const char*>> cases = {
      {{3, 3, 16, 24}, ":2"}, {{16, 8, 3, 3}, ":0"}, {{5, 12, 40}, ":1"}};
  for (const auto& [s, spec] : cases)
    for (const char* name : {"mxfp8e4", "nvfp4", "e4m3fn_float32_t0", "int4_float16_t64"}) {
      const DataType d = DataType::parse(name);
      const Tensor x = f32(mixed(numel(s), rng), s);
      CastOptions o = cpu_opts();
      AxisSpec::parse(spec).apply(o);
      const Shape v = cast_view_shape(s, resolve_axis(o, s));
      for (CastMode mode : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
        const std::string what = std::string(name) + " " + shape_str(s) + " " + spec + " " +
                                 to_string(mode) + " (seed " + std::to_string(seed) + ")";
        o.mode = mode;
        CastOptions ov = cpu_opts();
        ov.mode = mode;
        ov.axis = 0;
        const CastResult got = cast(x, d, o);
        const CastResult want = cast(x.reshaped(v), d, ov);
        EXPECT_TRUE(got.options.lead) << what;
        EXPECT_EQ(got.shape, s) << what;
        const Tensor g = upcast(got);
        ASSERT_EQ(g.shape(), s) << what;
        EXPECT_EQ(first_diff(g.reshaped(v), upcast(want)), -1) << what;
        if (mode != CastMode::Virtual) expect_same_parts(got, want, what);
      }
    }
}
