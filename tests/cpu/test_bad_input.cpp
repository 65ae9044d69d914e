// Bad input: every case is a castscope::Error whose message names the problem; nothing crashes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "helpers.hpp"

using namespace cputest;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Runs f, expects an Error whose message contains every one of the words (case-insensitive).
void expect_error(const std::string& what, const std::function<void()>& f,
                  std::initializer_list<const char*> words) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    const std::string msg = lower(e.what());
    for (const char* w : words)
      EXPECT_NE(msg.find(lower(w)), std::string::npos)
          << what << ": message \"" << e.what() << "\" does not name \"" << w << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not a castscope::Error: " << e.what();
  }
}

Tensor ones(const Shape& s) {
  std::vector<float> v(numel(s), 1.0f);
  return f32(v, s);
}

TEST(BadInput, EmptyTensors) {
  for (const Shape& s : {Shape{0}, Shape{3, 0}, Shape{0, 32}}) {
    const Tensor x = Tensor::empty(DType::F32, s);
    for (const char* d : {"mxfp4e2", "e4m3fn", "int8_sc", "nvfp4"})
      expect_error(std::string(d) + " on " + shape_str(s),
                   [&] { cast(x, DataType::parse(d), cpu_opts()); }, {"empty"});
  }
}

// A tile longer than its axis is not an error: it is one partial tile, which behaves as if the
// axis were padded with zeros (docs/formats.md), so the values equal those of the padded cast.
TEST(BadInput, TileLongerThanAxisIsOnePartialTile) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  struct Case {
    const char* dtype;
    Shape shape, padded;
    int axis;
  };
  for (const Case& c :
       {Case{"mxfp4e2", {4, 16}, {4, 32}, -1}, Case{"nvfp4", {8, 64}, {16, 64}, 0},
        Case{"fp8e4_block128", {64, 256}, {128, 256}, -1},
        Case{"fp8e4_block128", {1, 128}, {128, 128}, -1}, Case{"mx9", {4}, {16}, -1},
        Case{"mxfp8e4", {6, 2, 3, 3}, {6, 2, 3, 32}, -1}}) {
    const int64_t n = numel(c.shape);
    const Tensor x = f32(mixed(n, rng), c.shape);
    // The padded tensor: x in the leading corner, zeros elsewhere.
    Tensor p = Tensor::empty(DType::F32, c.padded);
    float* pp = p.mutable_ptr<float>();
    std::fill(pp, pp + p.numel(), 0.0f);
    const int rank = static_cast<int>(c.shape.size());
    std::vector<int64_t> idx(rank);
    auto flat = [&](const Shape& s) {
      int64_t f = 0;
      for (int k = 0; k < rank; ++k) f = f * s[k] + idx[k];
      return f;
    };
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = i;
      for (int k = rank - 1; k >= 0; --k) {
        idx[k] = r % c.shape[k];
        r /= c.shape[k];
      }
      pp[flat(c.padded)] = x.ptr<float>()[i];
    }
    CastOptions o = cpu_opts();
    o.axis = c.axis;
    const Tensor got = cast(x, DataType::parse(c.dtype), o).values;
    const Tensor want = cast(p, DataType::parse(c.dtype), o).values;
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = i;
      for (int k = rank - 1; k >= 0; --k) {
        idx[k] = r % c.shape[k];
        r /= c.shape[k];
      }
      ASSERT_TRUE(same(got.ptr<float>()[i], want.ptr<float>()[flat(c.padded)]))
          << c.dtype << " " << shape_str(c.shape) << " element " << i << " (seed " << seed << ")";
    }
  }
}

TEST(BadInput, AxisOutOfRange) {
  for (int axis : {2, 5, -3, -100}) {
    CastOptions o = cpu_opts();
    o.axis = axis;
    expect_error("axis " + std::to_string(axis),
                 [&] {
                   cast(ones({4, 64}), DataType::parse("mxfp4e2"), o);
                 },
                 {"axis", std::to_string(axis).c_str()});
  }
  // A 2-D tile needs the axis before the tile axis.
  CastOptions o = cpu_opts();
  o.axis = 0;
  expect_error("2-D tile at axis 0",
               [&] {
                 cast(ones({16, 16}), DataType::parse("e4m3fn_float32_t4_t4"), o);
               },
               {"axis"});
  expect_error("2-D tile on rank 1",
               [&] { cast(ones({64}), DataType::parse("e4m3fn_float32_t4_t4"), cpu_opts()); },
               {"2-d"});
}

TEST(BadInput, NonFloatInput) {
  for (DType t : {DType::I32, DType::U8, DType::I64, DType::Bool}) {
    const Tensor x = Tensor::empty(t, {4, 32});
    expect_error(std::string("input ") + dtype_name(t),
                 [&] { cast(x, DataType::parse("mxfp4e2"), cpu_opts()); }, {dtype_name(t)});
  }
}

// Combinations the grammar can spell but the engine cannot cast.
TEST(BadInput, UnsupportedCombinations) {
  const char* bad[] = {
      "int8",                 // integers must be scaled
      "uint4",                // uint without a zero point
      "uint4_e8m0_t32",       // uint needs a float scale
      "e4m3fn_e8m0_t16n5m4",  // N larger than M
      "e4m3fn_e8m0_t16n2m3",  // M must divide the tile
      "e2m1fnuz_e8m0_t32s5",  // subtile must divide the tile
      "e2m1fnuz_int8_t32",    // int scale for float data
      "e2m1fnuz_e8m0_t0_t0",  // two channel axes
  };
  for (const char* s : bad) {
    try {
      const DataType d = DataType::parse(s);
      expect_error(s, [&] { cast(ones({64, 64}), d, cpu_opts()); }, {});
    } catch (const Error& e) {
      EXPECT_GT(std::string(e.what()).size(), 5u) << s;
    } catch (const std::exception& e) {
      ADD_FAILURE() << s << ": not a castscope::Error: " << e.what();
    }
  }
}

// Runs f in a child process so that a crash is a test failure rather than the end of the suite;
// the child must see an Error whose message names `word`.
void expect_error_isolated(const std::string& what, const std::function<void()>& f,
                           const std::string& word) {
  EXPECT_EXIT(
      {
        try {
          f();
          std::fprintf(stderr, "no error\n");
        } catch (const Error& e) {
          std::fprintf(stderr, "error: %s\n", lower(e.what()).c_str());
          std::exit(0);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "error: .*" + word)
      << what;
}

// Mismatched shapes between the tensors of a cast result (as a hostile file could produce them).
TEST(BadInput, MismatchedResults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor x = ones({4, 64});
  const DataType d = DataType::parse("mxfp4e2");
  const CastResult a = cast(x, d, cpu_opts(CastMode::Actual));
  {
    CastResult bad = a;
    bad.scale = Tensor::empty(DType::U8, {4, 1});
    expect_error_isolated(
        "scale of the wrong shape", [&] { upcast(bad); }, "scale");
    expect_error_isolated(
        "pack of a wrong scale", [&] { pack(bad); }, "scale");
  }
  {
    CastResult bad = a;
    bad.codes = Tensor::empty(DType::U8, {4, 63});
    expect_error_isolated(
        "codes of the wrong shape", [&] { upcast(bad); }, "codes");
  }
  {
    CastResult bad = cast(x, d, cpu_opts(CastMode::Compress));
    bad.codes = Tensor::empty(DType::U8, {4, 31});
    expect_error_isolated(
        "packed codes too short", [&] { unpack(bad); }, "codes");
  }
  {
    CastResult bad = a;
    bad.scale = Tensor();
    expect_error_isolated(
        "missing scale", [&] { upcast(bad); }, "scale");
  }
  {
    CastResult bad = cast(x, DataType::parse("nvfp4"), cpu_opts(CastMode::Actual));
    bad.tenscale = Tensor();
    expect_error_isolated(
        "missing tensor scale", [&] { upcast(bad); }, "scale");
  }
}

// Non-finite values are data, not errors; casting them never throws and is counted.
TEST(BadInput, NonFiniteIsCounted) {
  std::vector<float> v(64, 1.0f);
  v[0] = NAN;
  v[1] = INFINITY;
  v[40] = -INFINITY;
  for (const char* name : {"mxfp4e2", "e4m3fn", "int8_sc", "nvfp4", "uint4_ff32", "tcfp8"}) {
    const CastResult r = cast(f32(v, {2, 32}), DataType::parse(name), cpu_opts());
    EXPECT_EQ(r.counts.nonfinite, 3) << name;
  }
}

}  // namespace
