// GPU casts against the CPU engine, bit for bit: every registry datatype, round mode, scale mode
// and cast mode on fresh random inputs with NaN, Inf, ties, subnormals and max / midmax values.
#include <cstdlib>
#include <cstring>

#include "gpu_test_util.hpp"

#include "castscope/datatype.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"
#include "core/plan.hpp"

namespace castscope::gputest {
namespace {

const Round kRounds[] = {Round::Even, Round::Away, Round::Zero, Round::Stochastic};
const ScaleMode kScaleModes[] = {ScaleMode::Floor, ScaleMode::Ceil, ScaleMode::Midmax,
                                 ScaleMode::Option3, ScaleMode::TopBinade};

Tensor input_for(const DataType& d, const Shape& shape, uint64_t seed) {
  const NumberSpec& n = d.number();
  const double mx = d.family() == Family::Standard ? n.max() : 448.0;
  const double mid = d.family() == Family::Standard && n.is_float() ? n.midmax() : mx * 1.0625;
  return random_input(shape, seed, mx, mid);
}

// Compares one cast; returns "" or the first difference.
std::string compare(const Tensor& x, const DataType& d, const CastOptions& o) {
  CastResult c = cpu_cast(x, d, o);
  CastResult g = cuda::cast(x, d, o);
  if (g.backend != "cuda") return "GPU result came from backend " + g.backend;
  return result_diff(c, g);
}

TEST(GpuCast, EveryRegistryDatatypeRoundScaleAndMode) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  // Shapes that do not tile: 160 columns (a partial 128-tile) and 136 rows (a partial 2-D tile).
  const Shape shape{136, 160};
  int casts = 0;
  uint64_t k = 0;
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    if (d.family() == Family::GGML) continue;  // CPU only: GgmlOnAnyDeviceIsTheCpuCast
    const bool scale_modes = d.scaled() && d.number().is_float() && d.family() == Family::Standard;
    for (Round r : kRounds)
      for (ScaleMode sm : kScaleModes) {
        if (!scale_modes && sm != ScaleMode::Floor) continue;
        const Tensor x = input_for(d, shape, seed + ++k);
        for (CastMode m : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
          if (m == CastMode::Actual && r != Round::Even) continue;
          CastOptions o;
          o.mode = m;
          o.round = r;
          o.scale_mode = sm;
          o.seed = seed ^ k;
          const std::string diff = compare(x, d, o);
          ASSERT_EQ(diff, "") << e.name << " round " << to_string(r) << " scale " << to_string(sm)
                              << " mode " << to_string(m) << " (seed " << seed << ", input seed "
                              << seed + k << ")";
          ++casts;
        }
      }
  }
  EXPECT_GT(casts, 300);
}

Tensor to_bf16(const Tensor& x32) {
  Tensor xb = Tensor::empty(DType::BF16, x32.shape());
  for (int64_t i = 0; i < x32.numel(); ++i)
    xb.mutable_ptr<uint16_t>()[i] = float_to_bf16(x32.ptr<float>()[i]);
  return xb;
}

// x without NaN / Inf (a non-finite value anywhere makes NVFP4's tensor scale NaN, so only a
// finite tensor reaches its float path), its first row scaled far down (NVFP4 tiles whose e4m3
// scale rounds to zero).
Tensor finite_copy(const Tensor& x32) {
  Tensor f = Tensor::empty(DType::F32, x32.shape());
  const int64_t cols = x32.shape().back();
  for (int64_t i = 0; i < x32.numel(); ++i) {
    const float v = x32.ptr<float>()[i];
    const float w = std::isfinite(v) ? v : std::copysign(3.0f, v);
    f.mutable_ptr<float>()[i] = i < cols ? std::ldexp(w, -30) : w;
  }
  return f;
}

// lean_kernel (MX tiles with a compile-time grid, NVFP4, unscaled e4m3fn / e5m2 / bfloat16) and
// the TCFP kernel's float path from float32 and bfloat16 input, with and without NaN / Inf, in
// shapes that fill partial warps; every scale mode and both code layouts. The next test runs
// shapes large enough that each thread takes several rounds of its grid-stride loop.
TEST(GpuCast, LeanKernelsEqualCpuFromFloat32AndBfloat16) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 100;
  int lean = 0;
  // Tiles of 8, 16 and 32: one, two or four 16-byte chunks per lane from bfloat16 (two, four and
  // four from float32, the last with two lanes a tile).
  for (const char* name :
       {"mxfp8e4", "mxfp8e5", "mxfp6e2", "mxfp6e3", "mxfp4e2", "mxint8", "bfp16", "e4m3fn_e8m0_t16",
        "e2m1fnuz_e8m0_t8", "int8_e8m0_t16", "nvfp4", "e2m1fnuz_e4m3fn_float32_t8",
        "e2m1fnuz_e4m3fn_float32_t32", "float8_e4m3fn", "float8_e5m2", "bfloat16", "tcfp8",
        "tcfp12", "tcfp16"}) {
    const DataType d = DataType::parse(name);
    const std::string kernel = d.family() != Family::Standard ? "tcfp-lean" : "lean";
    int on_lean[2] = {0, 0};  // casts of this datatype that ran it, from float32 / bfloat16
    for (const Shape& shape : {Shape{37, 96}, Shape{136, 160}})
      for (ScaleMode sm : kScaleModes) {
        if (!(d.scaled() && d.number().is_float()) && sm != ScaleMode::Floor) continue;
        const Tensor x32 = input_for(d, shape, seed + ++k), f32 = finite_copy(x32);
        for (const Tensor& x : {x32, to_bf16(x32), f32, to_bf16(f32)})
          for (CastMode m : {CastMode::Actual, CastMode::Compress})
            for (Overflow ov : {Overflow::Saturate, Overflow::IEEE}) {
              if (d.scaled() && ov != Overflow::Saturate) continue;
              CastOptions o;
              o.mode = m;
              o.scale_mode = sm;
              o.overflow = ov;
              ASSERT_EQ(compare(x, d, o), "")
                  << name << " input " << dtype_name(x.dtype()) << " " << shape_str(shape)
                  << " scale " << to_string(sm) << " mode " << to_string(m) << " overflow "
                  << to_string(ov) << " (seed " << seed << ", input seed " << seed + k << ")";
              const bool ran = gpu::detail::cast_kernel(x, d, o) == kernel;
              lean += ran;
              on_lean[x.dtype() == DType::BF16] += ran;
            }
      }
    // Each datatype reaches its lean kernel from both inputs: one that fell off the path would
    // still be bit-exact, so only this says the layouts above were exercised.
    EXPECT_GT(on_lean[0], 0) << name << " from float32 never ran " << kernel;
    EXPECT_GT(on_lean[1], 0) << name << " from bfloat16 never ran " << kernel;
  }
  EXPECT_GE(lean, 400) << "casts that ran lean_kernel or tcfp-lean";
}

TEST(GpuCast, LeanKernelsEqualCpuOverSeveralGridStrideRounds) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 1000;
  for (const char* name : {"mxfp8e4", "mxfp4e2", "nvfp4", "float8_e4m3fn", "tcfp8", "tcfp12"}) {
    const DataType d = DataType::parse(name);
    const Tensor x32 = input_for(d, {4096, 8192}, seed + ++k), f32 = finite_copy(x32);
    CastOptions o;
    o.mode = CastMode::Compress;
    const bool tcfp = d.family() != Family::Standard;
    for (const Tensor& x : {x32, to_bf16(x32), f32, to_bf16(f32)}) {
      EXPECT_EQ(gpu::detail::cast_kernel(x, d, o), tcfp ? "tcfp-lean" : "lean") << name;
      EXPECT_EQ(compare(x, d, o), "")
          << name << " input " << dtype_name(x.dtype()) << " 4096x8192 (seed " << seed
          << ", input seed " << seed + k << ")";
    }
  }
}

TEST(GpuCast, OverflowIeeeAndUnscaledFormats) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  for (const char* name : {"float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "e2m1",
                           "float8_e5m2fnuz", "e3m2fnuz"}) {
    const DataType d = DataType::parse(name);
    const Tensor x = input_for(d, {33, 47}, seed + 1);  // odd sizes: no vector path, no packing
    for (Overflow ov : {Overflow::Saturate, Overflow::IEEE})
      for (CastMode m : {CastMode::Virtual, CastMode::Compress}) {
        CastOptions o;
        o.overflow = ov;
        o.mode = m;
        EXPECT_EQ(compare(x, d, o), "")
            << name << " overflow " << to_string(ov) << " seed " << seed;
      }
  }
}

TEST(GpuCast, InputDtypes) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const Tensor x32 = random_input({64, 96}, seed + 2, 448.0, 464.0);
  Tensor x64 = Tensor::empty(DType::F64, x32.shape()), x16 = Tensor::empty(DType::F16, x32.shape()),
         xb = Tensor::empty(DType::BF16, x32.shape());
  for (int64_t i = 0; i < x32.numel(); ++i) {
    const float v = x32.ptr<float>()[i];
    x64.mutable_ptr<double>()[i] =
        static_cast<double>(v) * (1.0 + 1e-12);  // bits a float cannot hold
    x16.mutable_ptr<uint16_t>()[i] = float_to_half(v);
    xb.mutable_ptr<uint16_t>()[i] = float_to_bf16(v);
  }
  for (const char* name : {"mxfp8e4", "mxfp4e2", "nvfp4", "mxint8", "mx6", "int8_sc", "uint4_ss32",
                           "tcfp12", "fp8e4_tensor", "float8_e4m3fn"})
    for (const Tensor* x : std::initializer_list<const Tensor*>{&x32, &x64, &x16, &xb})
      for (CastMode m : {CastMode::Virtual, CastMode::Compress}) {
        CastOptions o;
        o.mode = m;
        o.round = Round::Stochastic;
        o.seed = seed;
        EXPECT_EQ(compare(*x, DataType::parse(name), o), "")
            << name << " input " << dtype_name(x->dtype()) << " mode " << to_string(m) << " seed "
            << seed;
      }
}

TEST(GpuCast, AxesTwoDTilesSparsityAndSubtiles) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const AxisCase cases[] = {
      {"mxfp8e4", {40, 3, 70}, 0},               // tiles along the first axis, partial tile
      {"nvfp4", {5, 48, 7}, 1},                  // middle axis, multiscale
      {"e4m3fn_float32_t8_t8", {24, 36, 5}, 1},  // 2-D tile over axes (0, 1)
      {"int8_bfloat16_t16_t4", {2, 30, 18}, -1},
      {"e4m3fn_e8m0_t32n2m4", {12, 70}, -1},       // N:M along the tile, partial run at the end
      {"e4m3fn_float32_t8n2m4_t8", {20, 24}, -1},  // N:M along rows of a 2-D tile
      {"int8_e8m0_t16s2", {10, 40}, -1},           // subtiles, partial tile
      {"e2m1fnuz_e8m0_t32s4o2", {9, 70}, -1},      // 2-bit subtile offsets, -0 codes
      {"e4m3fn_e8m0_t32s8o2", {5, 40, 6}, 1},      // offsets along the middle axis
      {"mx4", {7, 16, 9}, 1},
      {"uint8_ssc", {6, 50}, 0},    // uint with float zero point, channel along axis 0
      {"uint4_fi32", {9, 64}, -1},  // uint with int8 zero point
      {"int4_s", {17, 19}, -1},     // tensor scale
      {"tcfp16", {6, 70, 3}, 1},
      {"tcfp8", {3, 100}, -1},
      {"float8_e4m3fn", {}, -1},  // a scalar
  };
  uint64_t k = 100;
  for (const AxisCase& c : cases) {
    const DataType d = DataType::parse(c.dtype);
    const Tensor x = input_for(d, c.shape, seed + ++k);
    for (Round r : {Round::Even, Round::Stochastic})
      for (CastMode m : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
        CastOptions o;
        o.axis = c.axis;
        o.mode = m;
        o.round = r;
        o.seed = seed + k;
        EXPECT_EQ(compare(x, d, o), "")
            << c.dtype << " shape " << shape_str(c.shape) << " axis " << c.axis << " round "
            << to_string(r) << " mode " << to_string(m) << " seed " << seed;
      }
  }
}

TEST(GpuCast, UpcastOfGpuActualEqualsGpuVirtual) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 500;
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    if (d.family() == Family::GGML) continue;  // CPU only: GgmlOnAnyDeviceIsTheCpuCast
    const Tensor x = input_for(d, {136, 160}, seed + ++k);
    CastOptions o;
    o.mode = CastMode::Virtual;
    const Tensor v = cuda::cast(x, d, o).values;
    for (CastMode m : {CastMode::Actual, CastMode::Compress}) {
      o.mode = m;
      const Tensor u = upcast(cuda::cast(x, d, o));
      EXPECT_EQ(tensor_diff("values", v, u), "")
          << e.name << " " << to_string(m) << " seed " << seed;
    }
  }
}

// A tile longer than its axis is one partial tile (a conv kernel axis, a [1, 128] weight).
TEST(GpuCast, TileLongerThanItsAxis) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  uint64_t k = 0;
  for (const char* name : {"mxfp8e4", "mxfp4e2", "nvfp4", "e4m3fn_float32_t128_t128", "mx6"})
    for (const Shape& shape : {Shape{6, 3}, Shape{1, 128}, Shape{3, 5, 7}}) {
      const DataType d = DataType::parse(name);
      const Tensor x = input_for(d, shape, seed + ++k);
      for (CastMode m : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
        CastOptions o;
        o.mode = m;
        EXPECT_EQ(compare(x, d, o), "")
            << name << " " << shape_str(shape) << " (input seed " << seed + k << ")";
      }
    }
}

// ggml's block formats have no CUDA kernel: cast() on the GPU device gives the CPU cast's bits,
// and a direct CUDA call is refused rather than run as another family.
TEST(GpuCast, GgmlOnAnyDeviceIsTheCpuCast) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    if (d.family() != Family::GGML) continue;
    const Tensor x = input_for(d, {136, 160}, seed + 900);
    CastOptions g, c;
    g.device = Device::CUDA;
    c.device = Device::CPU;
    for (CastMode m : {CastMode::Virtual, CastMode::Actual}) {
      g.mode = c.mode = m;
      const CastResult a = cast(x, d, g), b = cast(x, d, c);
      const Tensor& ta = m == CastMode::Virtual ? a.values : a.codes;
      const Tensor& tb = m == CastMode::Virtual ? b.values : b.codes;
      ASSERT_EQ(ta.nbytes(), tb.nbytes()) << e.name;
      EXPECT_EQ(std::memcmp(ta.data(), tb.data(), ta.nbytes()), 0) << e.name << " seed " << seed;
    }
    EXPECT_THROW(cuda::cast(x, d, g), Error) << e.name;
  }
}

TEST(GpuCast, BadInputsAreErrors) {
  CS_REQUIRE_GPU();
  Tensor ints = Tensor::empty(DType::I32, {4, 4});
  EXPECT_THROW(cuda::cast(ints, DataType::parse("mxfp8e4"), {}), Error);
  Tensor small = Tensor::empty(DType::F32, {4, 4});
  small.mutable_ptr<float>()[3] = 1.5f;
  CastOptions o;
  o.axis = 5;
  EXPECT_THROW(cuda::cast(small, DataType::parse("e4m3fn_e8m0_t2"), o), Error);
}

// A request the CPU refuses as well (an axis out of range) is the user's error: it reaches them
// without a notice that the GPU failed and the CPU took over. Notices are once per process, so
// the check runs in a fresh one (the threadsafe death-test style re-executes this test alone).
TEST(GpuCast, BadRequestsRaiseWithoutAFallbackNotice) {
  CS_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        bool fell_back = false;
        set_notice_handler([&](const std::string& m) {
          fell_back = fell_back || m.find("GPU cast failed") != std::string::npos;
        });
        Tensor x = random_input({2, 16}, run_seed(), 4.0, 0.0);
        CastOptions o;
        o.axis = 5;
        o.device = Device::CUDA;  // Auto would keep work this small on the CPU
        bool raised = false;
        try {
          cast(x, DataType::parse("mxfp4e2"), o);
        } catch (const Error&) {
          raised = true;
        }
        std::exit(raised && !fell_back ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace castscope::gputest

namespace castscope::gputest {
namespace {

// The hot MX / NVFP4 grids reach the kernels' compile-time code functions (a mismatch in any
// format field sends them down the runtime path, bit-exact but several times slower).
TEST(GpuCast, HotGridsHaveCompileTimeCopies) {
  CS_REQUIRE_GPU();
  for (const char* name :
       {"mxfp8e4", "mxfp8e5", "mxfp6e2", "mxfp6e3", "mxfp4e2", "mxint8", "nvfp4"}) {
    const scalar::Format f = detail::make_plan({256, 256}, DataType::parse(name), {}).data;
    EXPECT_NE(gpu::detail::static_grid(f), 0) << name;
  }
}

}  // namespace
}  // namespace castscope::gputest
