// The methods layer: rtn is the plain cast, the quantizer's own scale choice and rounding give
// the cast's bits, GPTQ's codes lie on the datatype's grid and lower the layer output error on
// correlated inputs, reduce to round-to-nearest where the Hessian couples no columns (act-order
// restored), MSE / four-over-six / AWQ never lose to round-to-nearest on their own criterion,
// and bad input is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "castscope/error.hpp"
#include "castscope/method.hpp"
#include "test_seed.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

const uint64_t kSeed = test::test_seed();

// Datatypes the methods take: int4 group 128 (symmetric, asymmetric with an int zero point),
// NVFP4 with its tensor scale, MXFP4, FP8 per channel and in 128x128 blocks.
const char* kTypes[] = {"int4_float32_t128", "uint4_float32_int8_t128", "nvfp4",
                        "mxfp4e2",           "e4m3fn_float32_t0",       "e4m3fn_float32_t128_t128"};

CastOptions actual() {
  CastOptions o;
  o.mode = CastMode::Actual;
  return o;
}

// Inputs [tokens, cols] with correlated channels (a random mixing of normal values) and a few
// channels of larger scale, as activations have.
Tensor correlated_inputs(int64_t tokens, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> mix(static_cast<size_t>(cols * cols));
  for (double& a : mix) a = nd(rng) / std::sqrt(static_cast<double>(cols));
  for (int64_t i = 0; i < cols; ++i) mix[i * cols + i] += 1.0;
  Tensor x = Tensor::empty(DType::F32, {tokens, cols});
  std::vector<double> z(static_cast<size_t>(cols));
  for (int64_t t = 0; t < tokens; ++t) {
    for (double& a : z) a = nd(rng);
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t k = 0; k < cols; ++k) s += z[k] * mix[k * cols + c];
      x.mutable_ptr<float>()[t * cols + c] = static_cast<float>(s * (c % 17 == 0 ? 4.0 : 1.0));
    }
  }
  return x;
}

double output_error(const Tensor& x, const Tensor& w, const Tensor& q) {
  const int64_t T = x.shape()[0], C = x.shape()[1], R = w.shape()[0];
  double sum = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < R; ++r) {
      double d = 0;
      for (int64_t c = 0; c < C; ++c)
        d += static_cast<double>(x.ptr<float>()[t * C + c]) *
             (static_cast<double>(w.ptr<float>()[r * C + c]) - q.ptr<float>()[r * C + c]);
      sum += d * d;
    }
  return std::sqrt(sum);
}

TEST(Methods, RtnIsTheCastAndTheQuantizerGivesItsBits) {
  const Tensor w = test::normal({64, 256}, kSeed, 0.02);
  for (const char* name : kTypes) {
    SCOPED_TRACE(std::string(name) + " seed " + std::to_string(kSeed));
    const DataType d = DataType::parse(name);
    const CastResult ref = cast(w, d, actual());
    MethodOptions rtn;
    const CastResult r = quantize(w, d, actual(), rtn).cast;
    EXPECT_TRUE(test::same_bits(r.codes, ref.codes));
    // The quantizer's own choice (an MSE search of the single factor 1) and rounding.
    MethodOptions one;
    one.method = Method::MSE;
    one.maxshrink = 0.01;
    const CastResult m = quantize(w, d, actual(), one).cast;
    EXPECT_TRUE(test::same_bits(m.codes, ref.codes));
    EXPECT_TRUE(test::same_bits(m.scale, ref.scale));
    if (ref.zero) EXPECT_TRUE(test::same_bits(m.zero, ref.zero));
    if (ref.tenscale) EXPECT_TRUE(test::same_bits(m.tenscale, ref.tenscale));
    EXPECT_TRUE(test::same_bits(upcast(m), upcast(ref)));
    // The cast with given scales, on the cast's own scales.
    const CastResult g = cast_with_scales(w, ref);
    EXPECT_TRUE(test::same_bits(g.codes, ref.codes));
  }
}

TEST(Methods, GptqCodesOnTheGridAndBelowRtnOutputError) {
  const int64_t R = 48, C = 256, T = 512;
  const Tensor w = test::normal({R, C}, kSeed, 0.02);
  const Tensor x = correlated_inputs(T, C, kSeed + 1);
  for (const char* name : kTypes) {
    for (bool fixed : {false, true}) {
      SCOPED_TRACE(std::string(name) + (fixed ? " static" : " boundary") + " seed " +
                   std::to_string(kSeed));
      const DataType d = DataType::parse(name);
      MethodOptions m;
      m.method = Method::GPTQ;
      m.static_groups = fixed;
      const MethodResult g = quantize(w, d, actual(), m, {x}, "layer.weight");
      const Tensor q = upcast(g.cast);
      // On the grid: the values cast again with the result's own scales give its codes.
      EXPECT_TRUE(test::same_bits(cast_with_scales(q, g.cast).codes, g.cast.codes));
      const double e_gptq = output_error(x, w, q);
      const double e_rtn = output_error(x, w, upcast(cast(w, d, actual())));
      EXPECT_NEAR(g.output_error, e_gptq, 1e-6 * e_gptq);
      EXPECT_LT(e_gptq, e_rtn);
    }
  }
}

// X = diag(d): the Hessian is diagonal, GPTQ feeds no error anywhere and rounds as rtn does;
// with act-order the columns are processed by descending d and must come back in their order.
TEST(Methods, GptqWithADiagonalHessianIsRtnAndActOrderIsRestored) {
  const int64_t R = 32, C = 256;
  const Tensor w = test::normal({R, C}, kSeed, 0.02);
  std::mt19937_64 rng(kSeed + 2);
  std::uniform_real_distribution<double> ud(0.5, 2.0);
  Tensor x = Tensor::empty(DType::F32, {C, C});
  for (int64_t i = 0; i < C; ++i) x.mutable_ptr<float>()[i * C + i] = static_cast<float>(ud(rng));
  for (const char* name : kTypes) {
    for (bool act : {false, true}) {
      SCOPED_TRACE(std::string(name) + (act ? " act-order" : "") + " seed " +
                   std::to_string(kSeed));
      const DataType d = DataType::parse(name);
      MethodOptions m;
      m.method = Method::GPTQ;
      m.act_order = act;
      m.static_groups = act;
      const CastResult g = quantize(w, d, actual(), m, {x}).cast;
      const CastResult ref = cast(w, d, actual());
      EXPECT_TRUE(test::same_bits(g.codes, ref.codes));
      EXPECT_TRUE(test::same_bits(g.scale, ref.scale));
    }
  }
}

double norm_error(const Tensor& w, const Tensor& q, double p) {
  double e = 0;
  for (int64_t i = 0; i < w.numel(); ++i)
    e += std::pow(std::fabs(static_cast<double>(q.ptr<float>()[i]) - w.ptr<float>()[i]), p);
  return e;
}

TEST(Methods, SearchedScalesNeverLoseToRtn) {
  const Tensor w = test::normal({64, 256}, kSeed, 0.02);
  for (const char* name : kTypes) {
    SCOPED_TRACE(std::string(name) + " seed " + std::to_string(kSeed));
    const DataType d = DataType::parse(name);
    MethodOptions m;
    m.method = Method::MSE;
    const Tensor q = upcast(quantize(w, d, actual(), m).cast);
    const Tensor r = upcast(cast(w, d, actual()));
    EXPECT_LE(norm_error(w, q, 2.4), norm_error(w, r, 2.4));
  }
  const DataType nv = DataType::parse("nvfp4");
  MethodOptions fos;
  fos.method = Method::MSE;
  fos.four_over_six = true;
  const CastResult f = quantize(w, nv, actual(), fos).cast;
  const double e46 = norm_error(w, upcast(f), 2),
               e6 = norm_error(w, upcast(cast(w, nv, actual())), 2);
  EXPECT_LT(e46, e6) << "seed " << kSeed;
}

TEST(Methods, AwqScalesNeverLoseToRtnOnTheCalibration) {
  const int64_t R = 32, C = 256, T = 256;
  const Tensor w = test::normal({R, C}, kSeed, 0.02);
  const Tensor x = correlated_inputs(T, C, kSeed + 3);
  for (const char* name : {"int4_float32_t128", "nvfp4"}) {
    SCOPED_TRACE(std::string(name) + " seed " + std::to_string(kSeed));
    const DataType d = DataType::parse(name);
    MethodOptions m;
    m.method = Method::AWQ;
    const MethodResult a = quantize(w, d, actual(), m, {x});
    ASSERT_EQ(a.pre_quant_scale.numel(), C);
    Tensor q = upcast(a.cast);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        q.mutable_ptr<float>()[r * C + c] /= a.pre_quant_scale.ptr<float>()[c];
    EXPECT_NEAR(output_error(x, w, q), a.output_error, 1e-6 * a.output_error);
    EXPECT_LE(a.output_error, output_error(x, w, upcast(cast(w, d, actual()))));
  }
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Methods, BadInputIsRefusedByName) {
  const Tensor w = test::normal({16, 256}, kSeed, 0.02);
  const DataType d = DataType::parse("int4_float32_t128");
  MethodOptions g;
  g.method = Method::GPTQ;
  expect_error([&] { quantize(w, d, actual(), g, {}, "blk.0.q"); }, {"gptq", "blk.0.q", "calib"});
  const Tensor x = test::normal({8, 128}, kSeed);
  expect_error([&] { quantize(w, d, actual(), g, {x}, "blk.0.q"); },
               {"blk.0.q", "[8, 128]", "[16, 256]", "256"});
  Tensor bad = w.clone();
  bad.mutable_ptr<float>()[5] = NAN;
  expect_error(
      [&] {
        quantize(bad, d, actual(), g, {test::normal({8, 256}, kSeed)}, "w");
      },
      {"non-finite", "element 5"});
  MethodOptions act = g;
  act.act_order = true;
  expect_error(
      [&] {
        quantize(w, d, actual(), act, {test::normal({8, 256}, kSeed)});
      },
      {"act-order", "--static-groups"});
  expect_error(
      [&] {
        quantize(w, DataType::parse("q4_0"), actual(), g, {test::normal({8, 256}, kSeed)});
      },
      {"gptq", "q4_0", "ggml"});
  expect_error([&] { parse_method("optq"); }, {"optq", "gptq"});
  expect_error(
      [&] {
        cast_with_scales(test::normal({16, 128}, kSeed), cast(w, d, actual()));
      },
      {"[16, 128]", "[16, 256]"});
}

}  // namespace
}  // namespace castscope
