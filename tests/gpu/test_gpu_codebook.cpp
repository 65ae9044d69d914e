// Codebook casts on the GPU against the CPU engine, bit for bit: implicit and generic codebooks,
// subtiles, float and exponent scales, scale modes, axes, short last tiles, every input dtype,
// both kernels (interval tables and encode_tile) and elements on every midpoint.
#include "gpu_test_util.hpp"

#include <fstream>
#include <random>

#include "backends/device_api.hpp"
#include "castscope/datatype.hpp"
#include "families/codebook/cb_cast.hpp"
#include "families/codebook/cb_lut.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"

namespace castscope::gputest {
namespace {

// x as float32 (0), float64 (1), bfloat16 (2) or float16 (3), converted by rounding to nearest.
Tensor as_dtype(const Tensor& x, int which) {
  if (which == 0) return x;
  const DType dt = which == 1 ? DType::F64 : which == 2 ? DType::BF16 : DType::F16;
  Tensor y = Tensor::empty(dt, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float f = x.ptr<float>()[i];
    if (dt == DType::F64)
      y.mutable_ptr<double>()[i] = f;
    else
      y.mutable_ptr<uint16_t>()[i] = dt == DType::BF16 ? float_to_bf16(f) : float_to_half(f);
  }
  return y;
}

TEST(GpuCodebook, MatchesTheCpuBitForBit) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const std::string table = std::string(CASTSCOPE_BINARY_DIR) + "/gpu_cb_table.json";
  std::ofstream(table) << R"({"codebook": "cb22_e2m3fnuz_gputest", "mappings": [
      [-6,-2,-0.0,0,2,6], [-7.5,-1,-0.0,0,1,7.5], [-4,-3,-0.0,0,3,4], [-0.5,-0.25,-0.0,0,0.25,0.5]]})";
  // The table above has 6 entries, not 2^2 = 4: loading it must fail and name the field.
  EXPECT_THROW(load_codebook_file(table), Error);
  std::ofstream(table) << R"({"codebook": "cb22_e2m3fnuz_gputest", "mappings": [
      [-6,-0.0,0,6], [-7.5,-0.0,0,7.5], [-3,-0.0,0,3], [-0.5,-0.0,0,0.5]]})";
  load_codebook_file(table);
  const char* dtypes[] = {"icb44fi4_e32s8",
                          "icb44fi3_f32s4",
                          "icb44fi2_f32",
                          "icb42p1s2_e4m3fn_e8m0_t64s16",
                          "icb41ie_e2m3fnuz_e8m0_t16s2",
                          "icb44fi_e5m2_float16_t32s8",
                          "icb43fi_e4m3fn_e8m0_t32s8",
                          "cb22_e2m3fnuz_gputest_e8m0_t32s4"};
  uint64_t k = 0;
  int casts = 0;
  for (const char* name : dtypes) {
    const DataType d = DataType::parse(name);
    for (ScaleMode sm : {ScaleMode::Floor, ScaleMode::Midmax, ScaleMode::Ceil})
      for (int axis : {-1, 0})
        for (CastMode m : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
          // Rows that split into whole tiles run the interval kernel, the others encode_tile.
          const bool whole = ++k % 2 == 0;
          const int64_t len = whole ? 256 : 200;
          const Shape shape = axis == -1 ? Shape{37, len} : Shape{len, 3, 5};
          const Tensor x = as_dtype(random_input(shape, seed + k, 448.0, 464.0), k % 4);
          CastOptions o;
          o.mode = m;
          o.axis = axis;
          o.scale_mode = sm;
          const CastResult c = cpu_cast(x, d, o);
          const CastResult g = cuda::cast(x, d, o);
          ASSERT_EQ(g.backend, "cuda") << name;
          ASSERT_EQ(result_diff(c, g), "")
              << name << " " << to_string(sm) << " axis " << axis << " " << to_string(m) << " "
              << dtype_name(x.dtype()) << " seed " << seed << " input " << seed + k;
          EXPECT_EQ(gpu::detail::cast_kernel(x, d, o), whole ? "codebook" : "codebook-tile")
              << name;
          ++casts;
        }
  }
  EXPECT_EQ(casts, 8 * 3 * 2 * 3);
}

// Device-resident casts with values next to the codes (what the app's views read), over several
// rounds of the persistent grid, against the CPU's codes and upcast values.
TEST(GpuCodebook, DeviceResultsCarryTheCpuValues) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 0;
  for (const char* name : {"icb44fi4_e32", "icb44fi3_f32s8", "icb44fi2_e32s4"})
    for (int dt = 0; dt < 4; ++dt) {
      const DataType d = DataType::parse(name);
      const Tensor x = as_dtype(random_input({1024, 1024}, seed + ++k, 448.0, 464.0), dt);
      CastOptions o;
      o.mode = CastMode::Actual;
      const CastResult c = cpu_cast(x, d, o);
      const gpu::DeviceCastResult r = gpu::cast(gpu::DeviceTensor::upload(x), d, o, true);
      ASSERT_EQ(tensor_diff("values", upcast(c), r.values.download()), "")
          << name << " " << dtype_name(x.dtype()) << " seed " << seed + k;
      ASSERT_EQ(result_diff(c, r.download()), "") << name << " " << dtype_name(x.dtype());
    }
}

// Elements on every midpoint of every mapping times the scale and on their float neighbours, in
// tiles whose first element pins the scale: where one ulp decides the slot, both backends must
// decide alike. Float scales with significands other than 1 put the midpoints between the float
// keys' buckets, where the kernel checks the bucket's ends.
TEST(GpuCodebook, MidpointsAndTheirNeighboursChooseAlike) {
  CS_REQUIRE_GPU();
  for (const char* name : {"icb44fi4_e32", "icb44fi4_f32s8", "icb44fi3_f32s8",
                           "icb43fi_e3m2fnuz_e5m3_t32s8", "icb41ie_e2m3fnuz_e8m0_t16s2"}) {
    const DataType d = DataType::parse(name);
    const codebook::Layout l = codebook::make_layout({1, 32}, d, {});
    const detail::cb::Lut lut = detail::cb::build_lut(l.params());
    ASSERT_TRUE(lut.ok) << lut.why;
    const int tile = l.tile;
    const bool expo = l.base.kp.scale_is_exponent;
    for (double s : {1.0, 0x1.2p0, 0x1.6p-3, 0x1.ep5, 0x1.4p-9}) {
      if (expo && s != std::ldexp(1.0, std::ilogb(s))) continue;
      const float pin = static_cast<float>(l.base.kp.data_max * s);
      std::vector<float> v;
      for (double th : lut.thr) {
        const float at = static_cast<float>(th * s);  // exact: few significant bits
        for (float e : {at, std::nextafter(at, 0.0f), std::nextafter(at, 1e30f)}) {
          if (v.size() % tile == 0) v.push_back(pin);
          v.push_back(v.size() % 3 ? e : -e);
        }
      }
      while (v.size() % tile) v.push_back(pin * 0.25f);
      Tensor x = Tensor::empty(DType::F32, {static_cast<int64_t>(v.size() / tile), tile});
      std::copy(v.begin(), v.end(), x.mutable_ptr<float>());
      for (CastMode m : {CastMode::Virtual, CastMode::Actual}) {
        CastOptions o;
        o.mode = m;
        ASSERT_EQ(result_diff(cpu_cast(x, d, o), cuda::cast(x, d, o)), "")
            << name << " scale " << s;
      }
      EXPECT_EQ(gpu::detail::cast_kernel(x, d, {}), "codebook");
    }
  }
}

// Tiles of the mappings' own magnitudes times the scale (the first element pins it), as they are
// or one float ulp off: many mappings then have equal or nearly equal squared errors. Exact ties
// of identical magnitude sequences go to the lower mapping; other near ties the float sums cannot
// order, so the double sums must decide as the CPU does. Float scales get significands other than
// 1 (1.125, 1.375, 1.875 times a power of two), exponent scales powers of two.
TEST(GpuCodebook, MappingsThatTieOrNearlyTieChooseAsTheCpu) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  std::mt19937_64 rng(seed);
  for (const char* name : {"icb44fi4_e32", "icb44fi4_e32s8", "icb41ie_e2m3fnuz_e8m0_t16s2",
                           "icb44fi3_f32s8", "icb44fi4_f32", "icb43fi_e3m2fnuz_e5m3_t32s8"}) {
    const DataType d = DataType::parse(name);
    const codebook::Layout l = codebook::make_layout({1, 32}, d, {});
    const int tile = l.tile, half = l.base.half, nmaps = l.base.nmaps;
    const int64_t rows = 4096;
    Tensor x = Tensor::empty(DType::F32, {rows, tile});
    float* p = x.mutable_ptr<float>();
    const double sig[] = {1.0, 1.125, 1.375, 1.875};
    for (int64_t r = 0; r < rows; ++r) {
      const int m = static_cast<int>(rng() % nmaps), nudge = static_cast<int>(rng() % 3);
      const int e = static_cast<int>(rng() % 9) - 4;
      const double s = std::ldexp(l.base.kp.scale_is_exponent ? 1.0 : sig[rng() % 4], e);
      for (int i = 0; i < tile; ++i) {
        float v = static_cast<float>(l.mags[m * half + rng() % half] * s);
        if (nudge && rng() % 4 == 0) v = std::nextafter(v, nudge == 1 ? 0.0f : 1e30f);
        p[r * tile + i] = i == 0 ? static_cast<float>(l.base.kp.data_max * s) : rng() & 1 ? v : -v;
      }
    }
    for (int dt : {0, 2}) {
      const Tensor xi = as_dtype(x, dt);
      CastOptions o;
      o.mode = CastMode::Compress;
      ASSERT_EQ(result_diff(cpu_cast(xi, d, o), cuda::cast(xi, d, o)), "")
          << name << " " << dtype_name(xi.dtype()) << " seed " << seed;
      EXPECT_EQ(gpu::detail::cast_kernel(xi, d, o), "codebook") << name;
    }
  }
}

// The interval kernel's less common paths against the CPU: tiles so small that their scale puts
// float subnormals inside the bucket range (those keys go through the double), float-scaled tiles
// of the same (their float keys' products), midpoints with more
// fraction bits than the bucket table resolves (a comparison follows the bucket), tiles of four
// (chunks that do not end on a 16-byte load) and a last chunk of an odd number of tiles.
TEST(GpuCodebook, TinyTilesWideMidpointsAndShortChunksMatchTheCpu) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  std::mt19937_64 rng(seed);
  const std::string table = std::string(CASTSCOPE_BINARY_DIR) + "/gpu_cb_wide.json";
  std::ofstream(table) << R"({"codebook": "cb31_e5m2_gpuwide", "mappings": [
      [-40960,-32768,-0.00006103515625,-0.0,0,0.00006103515625,32768,40960],
      [-4,-1,-0.5,-0.0,0,0.5,1,4]]})";
  load_codebook_file(table);
  for (const char* name : {"icb44fi4_e32", "icb44fi3_f32s8", "cb31_e5m2_gpuwide_e8m0_t32s8",
                           "icb41ie_e2m3fnuz_e8m0_t4s2"}) {
    const DataType d = DataType::parse(name);
    const codebook::Layout l = codebook::make_layout({1, 32}, d, {});
    const detail::cb::Lut lut = detail::cb::build_lut(l.params());
    ASSERT_TRUE(lut.ok) << name << ": " << lut.why;
    if (std::string(name).find("wide") != std::string::npos) EXPECT_GT(lut.ix.max_steps, 0);
    const int64_t cols = 4 * l.tile, rows = 1001;  // 4004 tiles: the last chunk holds an odd number
    Tensor x = random_input({rows, cols}, seed + 17, 448.0, 464.0);
    float* p = x.mutable_ptr<float>();
    std::normal_distribution<double> nd;
    for (int64_t t = 0; t < rows * 4; t += 2) {
      // Every other tile tiny: its largest magnitude from 2^-149 to 2^-100, the rest below it.
      const int top = -149 + static_cast<int>(rng() % 50);
      for (int i = 0; i < l.tile; ++i) {
        const double v = i == 0 ? std::ldexp(1.0, top) : nd(rng) * std::ldexp(1.0, top - 3);
        p[t * l.tile + i] = static_cast<float>(rng() & 1 ? v : -v);
      }
    }
    for (int dt : {0, 2, 3}) {
      const Tensor xi = as_dtype(x, dt);
      for (CastMode m : {CastMode::Actual, CastMode::Compress}) {
        CastOptions o;
        o.mode = m;
        ASSERT_EQ(result_diff(cpu_cast(xi, d, o), cuda::cast(xi, d, o)), "")
            << name << " " << dtype_name(xi.dtype()) << " " << to_string(m) << " seed " << seed;
      }
      EXPECT_EQ(gpu::detail::cast_kernel(xi, d, {}), "codebook") << name;
    }
  }
}

}  // namespace
}  // namespace castscope::gputest
