// linear_error() on the GPU: the product of the cast operands through cuBLASLt (FP8 tensor cores
// for per-tensor FP8, 1x128 / 128x128 block FP8 and TCFP; bf16 / fp32 otherwise) against the
// exact product of the cast operands, and its output SNR against the CPU path's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "castscope/export.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/matmul.hpp"
#include "castscope/modelmap.hpp"
#include "gpu_test_util.hpp"

namespace castscope::gputest {
namespace {

// Shapes that are not multiples of 16 (tokens, out) or of 128 (out), and 5 K blocks of 128, so
// the padding of the FP8 operands and the scale layouts are exercised.
constexpr int64_t kTokens = 40, kIn = 640, kOut = 200;

Tensor normal(const Shape& shape, uint64_t seed, double sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  Tensor t = Tensor::empty(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = static_cast<float>(nd(rng));
  return t;
}

// The product the GEMM should compute, exactly (fp64): P = sum_k a b over the terms the GEMM
// multiplies, and S = sum_k |a b| (the scale of any accumulation error).
struct Exact {
  std::vector<double> p, s;
};

// a [tokens, in] and b [out, in] as pairs of terms: the product is sum over pairs (i, j) in
// `pairs` of a_i b_j^T.
Exact exact_product(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                    const std::vector<std::pair<int, int>>& pairs) {
  Exact e;
  e.p.assign(kTokens * kOut, 0.0);
  e.s.assign(kTokens * kOut, 0.0);
  for (const auto& ij : pairs) {
    const float* pa = a[static_cast<size_t>(ij.first)].ptr<float>();
    const float* pb = b[static_cast<size_t>(ij.second)].ptr<float>();
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t c = 0; c < kOut; ++c) {
        double sum = 0, abs = 0;
        for (int64_t k = 0; k < kIn; ++k) {
          const double v = double(pa[t * kIn + k]) * pb[c * kIn + k];
          sum += v;
          abs += std::fabs(v);
        }
        e.p[static_cast<size_t>(t * kOut + c)] += sum;
        e.s[static_cast<size_t>(t * kOut + c)] += abs;
      }
  }
  return e;
}

// The hi and lo terms of a TCFP cast (CPU): upcast with the other term's codes set to zero.
std::pair<Tensor, Tensor> tcfp_terms(const Tensor& x, const DataType& d) {
  CastOptions o;
  o.device = Device::CPU;
  o.mode = CastMode::Actual;
  const CastResult r = cast(x, d, o);
  auto zeroed = [](const Tensor& t) { return Tensor::empty(t.dtype(), t.shape()); };
  CastResult hi = r, lo = r;
  hi.residual = zeroed(r.residual);
  lo.codes = zeroed(r.codes);
  return {upcast(hi), upcast(lo)};
}

double rel_norm(const Tensor& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(y.ptr<float>()[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// ||a - b|| over all outputs.
double dist(const Tensor& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = double(a.ptr<float>()[i]) - b[i];
    s += d * d;
  }
  return std::sqrt(s);
}

struct Case {
  const char* act;
  const char* weight;
  const char* product;  // the path expected on a GPU with FP8 tensor cores
  bool needs_sm90;
};

// Runs one pair on the GPU and the CPU and checks the GPU product against the exact one.
void check_case(const Case& c, const Tensor& x, const Tensor& w, uint64_t seed) {
  SCOPED_TRACE(std::string(c.act) + " x " + c.weight + ", seed " + std::to_string(seed));
  LinearErrorOptions o;
  o.act_dtype = DataType::parse(c.act);
  o.weight_dtype = DataType::parse(c.weight);
  o.keep_outputs = true;
  o.gemm_iters = 2;
  o.cast.device = Device::CUDA;
  const LinearError g = linear_error(x, w, o);
  o.cast.device = Device::CPU;
  const LinearError h = linear_error(x, w, o);
  EXPECT_EQ(h.product, "fp32 (CPU)");
  const int cc = gemm_compute_capability();
  if (c.needs_sm90 && cc / 10 != 9) {
    EXPECT_FALSE(g.tensor_cores) << g.product;
    EXPECT_NE(g.product_note.find("sm_90"), std::string::npos) << g.product_note;
    return;
  }
  ASSERT_TRUE(g.tensor_cores) << g.product << ": " << g.product_note;
  EXPECT_EQ(g.product, c.product);
  EXPECT_GT(g.gemm_ms, 0);
  ASSERT_EQ(g.yq.numel(), kTokens * kOut);

  // The exact product of the operands as the GEMM multiplies them. FP8: the cast values (decoded
  // code times its float32 scale, rounded once to float32: 2^-24 per operand). TCFP: the three
  // terms hi hi + hi lo + lo hi of its matmul (lo lo is left out by design).
  CastOptions co;
  co.device = Device::CPU;
  Exact e;
  const bool tcfp =
      o.act_dtype->family() == Family::TCFP12 || o.act_dtype->family() == Family::TCFP16;
  if (tcfp) {
    const auto xa = tcfp_terms(x, *o.act_dtype), wb = tcfp_terms(w, *o.weight_dtype);
    e = exact_product({xa.first, xa.second}, {wb.first, wb.second}, {{0, 0}, {0, 1}, {1, 0}});
  } else {
    e = exact_product({cast(x, *o.act_dtype, co).values}, {cast(w, *o.weight_dtype, co).values},
                      {{0, 0}});
  }
  // Hopper's FP8 MMA adds the products of each K block with about 14 significant bits (each
  // addition off by at most 2^-13 of the running sum, a few alignment steps per 32-deep MMA)
  // before cuBLASLt promotes the block sum to fp32, whose additions add K/128 * 2^-24; the
  // operands' own float32 rounding adds 2 * 2^-24. 2^-8 of sum |a b| bounds all of it with room;
  // a wrong scale or scale layout misses it by orders of magnitude.
  const double bound = std::ldexp(1.0, -8) + (kIn / 128 + 4) * std::ldexp(1.0, -24);
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < e.p.size(); ++i) {
    const double d = std::fabs(double(g.yq.ptr<float>()[i]) - e.p[i]);
    worst = std::max(worst, d / e.s[i]);
    bad += !(d <= bound * e.s[i]);
  }
  EXPECT_EQ(bad, 0) << "worst |yq - P| / sum|ab| " << worst;
  // The norm-wise error of the block-scaled GEMM at large sizes is 1.3e-4 (docs/performance.md).
  const double prod_err = rel_norm(g.yq, e.p);
  EXPECT_LT(prod_err, 1e-3);

  // Output SNR: both paths measure the error of the cast operands' product against the uncast
  // product. A path's error yq - y is (P - Y) + (yq - P) - (y - Y) with P, Y the exact products,
  // so by the triangle inequality its norm is within off = ||yq - P|| + ||y - Y|| of ||P - Y||,
  // and its signal ||y|| within ||y - Y|| of ||Y||: the SNRs agree to the bound tol(), computed
  // from this data.
  const Exact ex = exact_product({x}, {w}, {{0, 0}});
  double sig = 0, qerr = 0;
  for (size_t i = 0; i < ex.p.size(); ++i) {
    sig += ex.p[i] * ex.p[i];
    qerr += (e.p[i] - ex.p[i]) * (e.p[i] - ex.p[i]);
  }
  const double base = std::sqrt(qerr);  // ||P - Y||
  const double exact_snr = 10 * std::log10(sig / qerr);
  auto tol = [&](const LinearError& r) {
    const double off = (dist(r.yq, e.p) + dist(r.y, ex.p)) / base;
    const double sg = dist(r.y, ex.p) / std::sqrt(sig);
    EXPECT_LT(off, 0.5);
    return -20 * std::log10(1 - std::min(off, 0.5)) - 20 * std::log10(1 - std::min(sg, 0.5));
  };
  std::printf("%-28s %-24s SNR gpu %.4f dB, exact %.4f dB, cpu %.4f dB; product rel.err %.2e\n",
              (std::string(c.act) + " x " + c.weight).c_str(), g.product.c_str(), g.snr_db,
              exact_snr, h.snr_db, prod_err);
  EXPECT_NEAR(g.snr_db, exact_snr, tol(g) + 1e-9);
  if (tcfp) return;  // the CPU multiplies hi + lo in full, lo lo included
  EXPECT_NEAR(h.snr_db, exact_snr, tol(h) + 1e-9);
  EXPECT_NEAR(g.snr_db, h.snr_db, tol(g) + tol(h) + 1e-9);
  EXPECT_NEAR(g.act_snr_db, h.act_snr_db, 1e-6 * std::fabs(h.act_snr_db));
  EXPECT_NEAR(g.weight_snr_db, h.weight_snr_db, 1e-6 * std::fabs(h.weight_snr_db));
}

TEST(GpuLinear, TensorCoreProductsMatchTheExactProductOfTheCastOperands) {
  std::string why;
  if (!gemm_available(&why)) GTEST_SKIP() << "GEMMs unavailable: " << why;
  const uint64_t seed = run_seed();
  // Activations with outlier channels (what per-tensor and 1x128 scales must cope with).
  const Tensor x = synthetic_activations(kTokens, kIn, 6, 12.0, seed);
  const Tensor w = normal({kOut, kIn}, seed + 1, 0.05);
  const Case cases[] = {
      {"fp8e4_tensor", "fp8e4_tensor", "cuBLASLt FP8 e4m3 x e4m3 per-tensor", false},
      {"fp8e4_tensor", "fp8e5_tensor", "cuBLASLt FP8 e4m3 x e5m2 per-tensor", false},
      {"e4m3fn_float32_t128", "e4m3fn_float32_t128_t128", "cuBLASLt FP8 block 1x128/128x128", true},
  };
  for (const Case& c : cases) check_case(c, x, w, seed);

  // Rotated operands: the GEMM multiplies the rotated codes, (x R^T)(W R^T)^T = x W^T, while the
  // CPU multiplies the values rotated back; the same quantization error either way.
  LinearErrorOptions o;
  o.act_dtype = DataType::parse("fp8e4_tensor");
  o.weight_dtype = DataType::parse("fp8e4_tensor");
  o.cast.rotate = {64, true, seed};
  o.cast.device = Device::CUDA;
  const LinearError g = linear_error(x, w, o);
  o.cast.device = Device::CPU;
  const LinearError h = linear_error(x, w, o);
  EXPECT_TRUE(g.tensor_cores) << g.product_note;
  EXPECT_NEAR(g.snr_db, h.snr_db, 0.05) << "rotated, seed " << seed;
}

TEST(GpuLinear, TcfpProductsMatchTheirThreeTerms) {
  std::string why;
  if (!gemm_available(&why)) GTEST_SKIP() << "GEMMs unavailable: " << why;
  const uint64_t seed = run_seed();
  // No outlier channels: TCFP's folding into one e4m3 tensor scale is exact for values within
  // 2^14 of the operand's largest, which holds for N(0, 1) data.
  const Tensor x = normal({kTokens, kIn}, seed + 2, 1.0);
  const Tensor w = normal({kOut, kIn}, seed + 3, 0.05);
  check_case({"tcfp12", "tcfp12", "cuBLASLt TCFP-12 (one FP8 GEMM over 3k)", false}, x, w, seed);
  check_case({"tcfp16", "tcfp16", "cuBLASLt TCFP-16 (one FP8 GEMM over 3k)", false}, x, w, seed);
}

// Pairs the tensor cores do not take fall back to a cuBLASLt GEMM of the cast values and say
// why; that GEMM is fp32 accumulation of exact products (bf16 inputs) or of fp32 inputs.
TEST(GpuLinear, OtherPairsFallBackAndSaySo) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const Tensor x = synthetic_activations(kTokens, kIn, 6, 12.0, seed + 4);
  const Tensor w = normal({kOut, kIn}, seed + 5, 0.05);
  struct Fallback {
    const char *act, *weight, *product, *note;
  } cases[] = {
      {"mxfp4e2", "mxfp4e2", "bf16 (GPU)", "not a pair the tensor cores multiply"},
      {"fp8e5_tensor", "fp8e5_tensor", "", "both operands e5m2"},
      {"nvfp4", "fp8e4_block128", "", "not a pair the tensor cores multiply"},
  };
  for (const Fallback& f : cases) {
    SCOPED_TRACE(std::string(f.act) + " x " + f.weight + ", seed " + std::to_string(seed));
    LinearErrorOptions o;
    o.act_dtype = DataType::parse(f.act);
    o.weight_dtype = DataType::parse(f.weight);
    o.keep_outputs = true;
    o.cast.device = Device::CUDA;
    const LinearError g = linear_error(x, w, o);
    EXPECT_FALSE(g.tensor_cores);
    if (f.product[0]) EXPECT_EQ(g.product, f.product);
    EXPECT_TRUE(g.product == "bf16 (GPU)" || g.product == "fp32 (GPU)") << g.product;
    EXPECT_NE(g.product_note.find(f.note), std::string::npos) << g.product_note;
    CastOptions co;
    co.device = Device::CPU;
    const Exact e = exact_product({cast(x, *o.act_dtype, co).values},
                                  {cast(w, *o.weight_dtype, co).values}, {{0, 0}});
    // Any order of kIn float32 additions of exact products: |error| <= (kIn - 1) 2^-24 sum |ab|
    // (to first order; +2 covers the rest).
    const double bound = (kIn + 2) * std::ldexp(1.0, -24);
    int64_t bad = 0;
    for (size_t i = 0; i < e.p.size(); ++i)
      bad += !(std::fabs(double(g.yq.ptr<float>()[i]) - e.p[i]) <= bound * e.s[i]);
    EXPECT_EQ(bad, 0);
    o.cast.device = Device::CPU;
    const LinearError h = linear_error(x, w, o);
    EXPECT_NEAR(g.snr_db, h.snr_db, 0.01);
  }
  // A block-scaled pair whose in-features are not whole 128 blocks: the cast still runs (a
  // partial tile), the tensor cores do not.
  const Tensor x2 = normal({kTokens, 320}, seed + 6, 1.0), w2 = normal({kOut, 320}, seed + 7, 0.05);
  LinearErrorOptions o;
  o.act_dtype = DataType::parse("e4m3fn_float32_t128");
  o.weight_dtype = DataType::parse("e4m3fn_float32_t128_t128");
  o.cast.device = Device::CUDA;
  const LinearError g = linear_error(x2, w2, o);
  EXPECT_FALSE(g.tensor_cores);
  EXPECT_FALSE(g.product_note.empty());
  // Nothing cast: no error at all, and the GPU's reference is the product.
  o.act_dtype.reset();
  o.weight_dtype.reset();
  const LinearError none = linear_error(x2, w2, o);
  EXPECT_EQ(none.rel_err, 0.0);
  EXPECT_EQ(none.product, "fp32 (GPU)");
}

// The model map's output column runs the same function and names the product in every cell.
TEST(GpuLinear, ModelMapCellsNameTheirProduct) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  MemoryModel m;
  m.add("model.layers.0.mlp.up_proj.weight", normal({kOut, kIn}, seed + 8, 0.05));
  MapOptions o;
  o.dtypes = {"fp8e4_tensor", "mxfp4e2"};
  o.activations = synthetic_activations(kTokens, kIn, 6, 12.0, seed + 9);
  o.cast.device = Device::CUDA;
  const ModelMap g = sweep_model(m, o);
  o.cast.device = Device::CPU;
  const ModelMap c = sweep_model(m, o);
  ASSERT_EQ(g.rows.size(), 1u);
  const std::vector<MapCell>& gc = g.rows[0].cells;
  const std::vector<MapCell>& cc = c.rows[0].cells;
  ASSERT_TRUE(gc[0].has_output && gc[1].has_output);
  std::string why;
  if (gemm_available(&why)) EXPECT_EQ(gc[0].out_product, "cuBLASLt FP8 e4m3 x e4m3 per-tensor");
  EXPECT_EQ(gc[1].out_product, "bf16 (GPU)");
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_EQ(cc[d].out_product, "fp32 (CPU)");
    EXPECT_NEAR(gc[d].out_snr_db, cc[d].out_snr_db, 0.05) << o.dtypes[d] << ", seed " << seed;
  }
}

// With activations the map uploads the activations once and each weight once, however many
// datatype columns there are, and every cell gives what linear_error gives without the reuse.
TEST(GpuLinear, ModelMapUploadsEachOperandOnce) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  MemoryModel m;
  m.add("model.layers.0.mlp.up_proj.weight", normal({kOut, kIn}, seed + 10, 0.05));
  m.add("model.layers.0.mlp.gate_proj.weight", normal({kOut, kIn}, seed + 11, 0.05));
  MapOptions o;
  o.dtypes = {"fp8e4_tensor", "mxfp4e2", "nvfp4", "mxfp6e2"};
  o.activations = synthetic_activations(kTokens, kIn, 6, 12.0, seed + 12);
  o.cast.device = Device::CUDA;
  const ModelMap g = sweep_model(m, o);
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.linear_uploads, 1u + 2u) << "activations once, then one upload per weight";
  for (const MapRow& row : g.rows) {
    const Tensor w = m.load(row.name);
    for (size_t d = 0; d < o.dtypes.size(); ++d) {
      ASSERT_TRUE(row.cells[d].has_output) << row.name << " " << o.dtypes[d];
      LinearErrorOptions lo;
      lo.cast = o.cast;
      lo.gemm_iters = 1;
      lo.weight_dtype = DataType::parse(o.dtypes[d]);
      lo.act_dtype = lo.weight_dtype;
      const LinearError alone = linear_error(o.activations, w, lo);
      EXPECT_EQ(row.cells[d].out_snr_db, alone.snr_db) << row.name << " " << o.dtypes[d];
      EXPECT_EQ(row.cells[d].out_product, alone.product) << row.name << " " << o.dtypes[d];
    }
  }
}

}  // namespace
}  // namespace castscope::gputest
