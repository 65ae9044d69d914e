// Actual and compressed casts: upcast equals the virtual cast bit for bit for every registry
// datatype, pack / unpack are lossless, and the tensors have the shapes of tensorcast-shapes.md.
#include "helpers.hpp"

using namespace cputest;

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

Shape shape_for(const DataType& d) {
  if (d.scaled() && d.scale()->tiles.size() == 2) return {130, 260};
  return {6, 130};
}

std::vector<float> with_specials(std::vector<float> x) {
  x[3] = NAN;
  x[200] = INFINITY;
  x[401] = -INFINITY;
  x[17] = 65504.0f * 4;
  return x;
}

TEST(Compress, UpcastEqualsVirtualForEveryRegistryDatatype) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    const Shape shape = shape_for(d);
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<float> xv = mixed(numel(shape), rng);
      if (variant == 1) xv = with_specials(xv);
      const Tensor x = f32(xv, shape);
      CastOptions o = cpu_opts();
      if (variant == 2) {
        o.round = parse_round("stochastic");
        o.seed = seed;
      }
      const std::string at =
          e.name + " variant " + std::to_string(variant) + " seed=" + std::to_string(seed);
      const Tensor virt = cast(x, d, o).values;
      ASSERT_EQ(virt.dtype(), DType::F32) << at;
      ASSERT_EQ(virt.shape(), shape) << at;
      o.mode = CastMode::Actual;
      const CastResult act = cast(x, d, o);
      o.mode = CastMode::Compress;
      const CastResult cmp = cast(x, d, o);
      const Tensor ua = upcast(act), uc = upcast(cmp);
      EXPECT_EQ(ua.shape(), shape) << at;
      EXPECT_EQ(uc.shape(), shape) << at;
      const int64_t da = first_diff(ua, virt), dc = first_diff(uc, virt);
      EXPECT_EQ(da, -1) << at << " actual: x=" << xv[std::max<int64_t>(da, 0)]
                        << " virtual=" << to_vec(virt)[std::max<int64_t>(da, 0)]
                        << " upcast=" << to_vec(ua)[std::max<int64_t>(da, 0)];
      EXPECT_EQ(dc, -1) << at << " compress: x=" << xv[std::max<int64_t>(dc, 0)]
                        << " virtual=" << to_vec(virt)[std::max<int64_t>(dc, 0)]
                        << " upcast=" << to_vec(uc)[std::max<int64_t>(dc, 0)];
      // pack(actual) is the compressed result and unpack(compressed) the actual one.
      const CastResult p = pack(act), u = unpack(cmp);
      for (auto [name, a, b] : {std::tuple{"codes", &p.codes, &cmp.codes},
                                {"scale", &p.scale, &cmp.scale},
                                {"zero", &p.zero, &cmp.zero},
                                {"tenscale", &p.tenscale, &cmp.tenscale},
                                {"meta", &p.meta, &cmp.meta},
                                {"mask", &p.mask, &cmp.mask},
                                {"residual", &p.residual, &cmp.residual}})
        EXPECT_TRUE(same_bytes(*a, *b)) << at << " pack(actual)." << name;
      for (auto [name, a, b] : {std::tuple{"codes", &u.codes, &act.codes},
                                {"scale", &u.scale, &act.scale},
                                {"zero", &u.zero, &act.zero},
                                {"tenscale", &u.tenscale, &act.tenscale},
                                {"meta", &u.meta, &act.meta},
                                {"mask", &u.mask, &act.mask},
                                {"residual", &u.residual, &act.residual}})
        EXPECT_TRUE(same_bytes(*a, *b)) << at << " unpack(compress)." << name;
      EXPECT_EQ(first_diff(upcast(unpack(pack(act))), virt), -1) << at;
    }
  }
}

// Shapes and dtypes of tensorcast-shapes.md for a [R, C] input with C = 130 (not a multiple of
// any tile): scale dims divide by the tile (rounded up), channel dims become 1, a tensor scale is
// one element, 4- and 2-bit codes pack 2 and 4 per byte along the last axis, masks 8 per byte,
// sparse data keeps N of M, meta has one bit per subtile (a byte per tile when packed).
struct ShapeCase {
  const char* dtype;
  Shape codes_actual, codes_packed, scale;
  DType scale_dtype;
  Shape zero, tenscale, meta_actual, meta_packed, mask_actual, mask_packed;
};

TEST(Compress, ShapesAndDtypes) {
  const int64_t R = 6, C = 130;
  const Shape full = {R, C};
  const ShapeCase cases[] = {
      {"mxfp4e2",
       full,
       {R, ceil_div(C, 2)},
       {R, ceil_div(C, 32)},
       DType::U8,
       {},
       {},
       {},
       {},
       {},
       {}},
      {"mxfp8e4", full, full, {R, ceil_div(C, 32)}, DType::U8, {}, {}, {}, {}, {}, {}},
      {"mxfp6e3", full, full, {R, ceil_div(C, 32)}, DType::U8, {}, {}, {}, {}, {}, {}},
      {"nvfp4",
       full,
       {R, ceil_div(C, 2)},
       {R, ceil_div(C, 16)},
       DType::F8E4M3,
       {},
       {1},
       {},
       {},
       {},
       {}},
      {"int8_sc", full, full, {R, 1}, DType::F32, {}, {}, {}, {}, {}, {}},
      {"int4_bc", full, {R, ceil_div(C, 2)}, {R, 1}, DType::BF16, {}, {}, {}, {}, {}, {}},
      {"fp8e4_tensor", full, full, {1}, DType::F32, {}, {}, {}, {}, {}, {}},
      {"uint4_fi32",
       full,
       {R, ceil_div(C, 2)},
       {R, ceil_div(C, 32)},
       DType::F16,
       {R, ceil_div(C, 32)},
       {},
       {},
       {},
       {},
       {}},
      {"uint8_ss", full, full, {1}, DType::F32, {1}, {}, {}, {}, {}, {}},
      {"mx9",
       full,
       full,
       {R, ceil_div(C, 16)},
       DType::U8,
       {},
       {},
       {R, ceil_div(C, 16) * 8},
       {R, ceil_div(C, 16)},
       {},
       {}},
      {"int2_e8m0_t16",
       full,
       {R, ceil_div(C, 4)},
       {R, ceil_div(C, 16)},
       DType::U8,
       {},
       {},
       {},
       {},
       {},
       {}},
      {"int4_e8m0_t16n2m4",
       full,
       {R, ceil_div(ceil_div(C, 4) * 2, 2)},
       {R, ceil_div(C, 16)},
       DType::U8,
       {},
       {},
       {},
       {},
       full,
       {R, ceil_div(C, 8)}},
      {"e3m2fnuz_e8m0_t16n4m8",
       full,
       {R, ceil_div(C, 8) * 4},
       {R, ceil_div(C, 16)},
       DType::U8,
       {},
       {},
       {},
       {},
       full,
       {R, ceil_div(C, 8)}},
      {"e4m3fn_e8m0_t32n2m4",
       full,
       {R, ceil_div(C, 4) * 2},
       {R, ceil_div(C, 32)},
       DType::U8,
       {},
       {},
       {},
       {},
       full,
       {R, ceil_div(C, 8)}},
  };
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const Tensor x = f32(mixed(R * C, rng), full);
  for (const ShapeCase& c : cases) {
    const DataType d = DataType::parse(c.dtype);
    const CastResult a = cast(x, d, cpu_opts(CastMode::Actual));
    const CastResult p = cast(x, d, cpu_opts(CastMode::Compress));
    EXPECT_EQ(a.codes.shape(), c.codes_actual) << c.dtype;
    EXPECT_EQ(p.codes.shape(), c.codes_packed) << c.dtype;
    EXPECT_EQ(a.scale.shape(), c.scale) << c.dtype;
    EXPECT_EQ(p.scale.shape(), c.scale) << c.dtype;
    EXPECT_EQ(a.scale.dtype(), c.scale_dtype) << c.dtype;
    auto check = [&](const char* what, const Tensor& t, const Shape& want) {
      if (want.empty()) {
        EXPECT_FALSE(static_cast<bool>(t)) << c.dtype << " has an unexpected " << what;
      } else {
        EXPECT_EQ(t.shape(), want) << c.dtype << " " << what;
      }
    };
    check("zero", a.zero, c.zero);
    check("tenscale", a.tenscale, c.tenscale);
    check("meta (actual)", a.meta, c.meta_actual);
    check("meta (packed)", p.meta, c.meta_packed);
    check("mask (actual)", a.mask, c.mask_actual);
    check("mask (packed)", p.mask, c.mask_packed);
    if (c.mask_actual.size()) {
      EXPECT_EQ(a.mask.dtype(), DType::Bool) << c.dtype;
      EXPECT_EQ(p.mask.dtype(), DType::U8) << c.dtype;
    }
    if (c.tenscale.size()) EXPECT_EQ(a.tenscale.dtype(), DType::F32) << c.dtype;
    if (c.zero.size()) {
      const std::string zn = d.scale()->second->name();
      EXPECT_STREQ(dtype_name(a.zero.dtype()), zn.c_str()) << c.dtype;
    }
  }
}

// Decision 8: element 2i in the low nibble, 2i+1 in the high nibble; 2-bit codes 4 per byte,
// element 4i in the lowest bits; masks 8 per byte, element 8i in bit 0.
TEST(Compress, PackingOrder) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t R = 3, C = 37;
  const Tensor x = f32(mixed(R * C, rng), {R, C});
  struct Case {
    const char* dtype;
    int bits;
  };
  for (const Case& c : {Case{"e2m1fnuz", 4}, Case{"mxfp4e2", 4}, Case{"int2_e8m0_t4", 2}}) {
    const DataType d = DataType::parse(c.dtype);
    const CastResult a = cast(x, d, cpu_opts(CastMode::Actual));
    const CastResult p = cast(x, d, cpu_opts(CastMode::Compress));
    const int per = 8 / c.bits;
    const int64_t pc = p.codes.shape().back();
    ASSERT_EQ(pc, ceil_div(C, per)) << c.dtype;
    ASSERT_EQ(dtype_size(a.codes.dtype()), 1u);
    const uint8_t* ac = static_cast<const uint8_t*>(a.codes.data());
    const uint8_t* pk = static_cast<const uint8_t*>(p.codes.data());
    const uint8_t mask = static_cast<uint8_t>((1 << c.bits) - 1);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < C; ++j) {
        const uint8_t byte = pk[r * pc + j / per];
        const uint8_t code = (byte >> ((j % per) * c.bits)) & mask;
        ASSERT_EQ(code, ac[r * C + j] & mask) << c.dtype << " r=" << r << " j=" << j;
      }
  }
  const DataType sp = DataType::parse("e4m3fn_e8m0_t4n2m4");
  const CastResult a = cast(x, sp, cpu_opts(CastMode::Actual));
  const CastResult p = cast(x, sp, cpu_opts(CastMode::Compress));
  const int64_t mc = p.mask.shape().back();
  ASSERT_EQ(mc, ceil_div(C, 8));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < C; ++j) {
      const bool bit = (p.mask.ptr<uint8_t>()[r * mc + j / 8] >> (j % 8)) & 1;
      ASSERT_EQ(bit, a.mask.ptr<uint8_t>()[r * C + j] != 0) << "mask r=" << r << " j=" << j;
    }
}

// N:M sparsity keeps the N largest magnitudes of every run of M along the tile axis: the mask
// has exactly N per full run, pruned values read as zero, and the counts agree.
TEST(Compress, SparsityKeepsLargest) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (const char* name : {"int8_e8m0_t16n2m4", "e2m1fnuz_e8m0_t32n2m4", "e4m3fn_e8m0_t32n1m4",
                           "e3m2fnuz_e8m0_t16n4m8"}) {
    const DataType d = DataType::parse(name);
    const TileSpec* t = d.sparse_tile();
    ASSERT_NE(t, nullptr) << name;
    const int64_t R = 5, C = 67;
    std::vector<float> xv(R * C);
    for (auto& v : xv) v = normal(rng);
    const CastResult a = cast(f32(xv, {R, C}), d, cpu_opts(CastMode::Actual));
    const std::vector<float> virt = to_vec(cast(f32(xv, {R, C}), d, cpu_opts()).values);
    const uint8_t* m = a.mask.ptr<uint8_t>();
    int64_t pruned = 0;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t b = 0; b < C; b += t->m) {
        const int64_t len = std::min<int64_t>(t->m, C - b);
        int kept = 0;
        float min_kept = INFINITY, max_pruned = 0;
        for (int64_t j = b; j < b + len; ++j) {
          const float mag = std::fabs(xv[r * C + j]);
          if (m[r * C + j]) {
            ++kept;
            min_kept = std::min(min_kept, mag);
          } else {
            ++pruned;
            max_pruned = std::max(max_pruned, mag);
            EXPECT_EQ(virt[r * C + j], 0.0f) << name << " pruned value shows";
          }
        }
        EXPECT_EQ(kept, std::min<int64_t>(t->n, len)) << name << " row " << r << " run " << b;
        EXPECT_GE(min_kept, max_pruned) << name << " row " << r << " run " << b << " seed=" << seed;
      }
    EXPECT_EQ(a.counts.pruned, pruned) << name;
  }
}

// A tile along axis 0 of a 3-D tensor equals casting the tensor with that axis moved last.
TEST(Compress, AxisEqualsTranspose) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t A = 40, B = 3, C = 5;
  const std::vector<float> xv = mixed(A * B * C, rng);
  std::vector<float> tv(xv.size());  // [C, B, A]
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) tv[(c * B + b) * A + a] = xv[(a * B + b) * C + c];
  for (const char* name : {"mxfp4e2", "mxint8", "nvfp4", "int8_sc", "mx9", "e4m3fn_e8m0_t8n2m4"}) {
    const DataType d = DataType::parse(name);
    CastOptions o = cpu_opts();
    o.axis = 0;
    const std::vector<float> got = to_vec(cast(f32(xv, {A, B, C}), d, o).values);
    const std::vector<float> want = to_vec(cast(f32(tv, {C, B, A}), d, cpu_opts()).values);
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_TRUE(same(got[(a * B + b) * C + c], want[(c * B + b) * A + a]))
              << name << " at " << a << "," << b << "," << c << " seed=" << seed;
    o.axis = -3;
    EXPECT_EQ(first_diff(cast(f32(xv, {A, B, C}), d, o).values, f32(got, {A, B, C})), -1) << name;
  }
}

// Padding never shows: a 33-wide row casts its last element as a one-element tile, the same as
// that element alone among zeros (zeros never influence a scale, decision 12).
TEST(Compress, PaddingNeverShows) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (const char* name : {"mxfp4e2", "mxfp8e4", "mxint4", "int4_f32", "uint4_ff32", "nvfp4"}) {
    const DataType d = DataType::parse(name);
    std::vector<float> xv(4 * 33);
    for (auto& v : xv) v = normal(rng) * 100;
    std::vector<float> alone(4 * 32, 0.0f);
    for (int r = 0; r < 4; ++r) alone[r * 32] = xv[r * 33 + 32];
    const CastResult r33 = cast(f32(xv, {4, 33}), d, cpu_opts(CastMode::Actual));
    const std::vector<float> v33 = to_vec(upcast(r33));
    if (d.multiscale()) continue;  // the tensor scale couples the tiles
    const std::vector<float> v1 = to_vec(cast(f32(alone, {4, 32}), d, cpu_opts()).values);
    for (int r = 0; r < 4; ++r)
      EXPECT_TRUE(same(v33[r * 33 + 32], v1[r * 32]))
          << name << " row " << r << " x=" << xv[r * 33 + 32] << " in 33-row " << v33[r * 33 + 32]
          << " alone " << v1[r * 32] << " seed=" << seed;
    EXPECT_EQ(r33.counts.clipped, cast(f32(xv, {4, 33}), d, cpu_opts()).counts.clipped);
  }
}

}  // namespace
