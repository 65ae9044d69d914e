// Tensor-core GEMMs through cuBLASLt (matmul.hpp): BF16 baseline, FP8 e4m3 with per-tensor
// scales, FP8 with 1x128 / 128x128 block scales, and the TCFP-12 / TCFP-16 matmuls.
//
// Every operand is stored K-contiguous (A as m x k rows, B as n x k rows), which is the "TN"
// layout cuBLASLt's FP8 kernels need. The TCFP matmuls run as ONE FP8 GEMM over a tripled K:
//   A' = [A_hi | A_hi/16 | A_lo],  B' = [B_hi ; B_lo ; B_hi/16],  C = 2^(Sa+Sb) * A' B'
// so A_hi B_hi + A_hi B_lo + A_lo B_hi accumulate inside the tensor cores. The format's own
// 32-value block scales (powers of two) are folded into e4m3 values at one tensor scale 2^S per
// operand (S = the largest block shift): exact wherever the folded value stays in e4m3's normal
// range, which holds for all but values far below their tensor's maximum. The residual terms are
// folded at 2^(S-4) and their partners divided by 16, so every K segment shares one alpha.
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "castscope/format.hpp"
#include "castscope/matmul.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"
#include "backends/cuda/gemm_lt.hpp"

namespace castscope {

namespace {

using gpu::DeviceTensor;
using gpu::detail::grid_for;
using gpu::detail::grid_start;
using gpu::detail::grid_stride;
using gpu::detail::lt_block_scales;
using gpu::detail::LtOperand;
using gpu::detail::LtScale;
using gpu::detail::stream;
using gpu::detail::tcfp_fold_operand;

#define CS_LT(call)                                                                                \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                              \
      throw Error(std::string("cuBLASLt: ") + #call + " failed: " + cublasLtGetStatusString(st_)); \
  } while (0)

// RAII owners of the cuBLASLt objects: `h`, created by the constructor, destroyed with the
// object.
template <class H, cublasStatus_t (*Destroy)(H)>
struct LtOwner {
  H h = nullptr;
  LtOwner() = default;
  ~LtOwner() {
    if (h) Destroy(h);
  }
  LtOwner(const LtOwner&) = delete;
  LtOwner& operator=(const LtOwner&) = delete;
};
struct LtHandle : LtOwner<cublasLtHandle_t, cublasLtDestroy> {
  LtHandle() { CS_LT(cublasLtCreate(&h)); }
};
struct MatmulDesc : LtOwner<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> {
  MatmulDesc(cublasComputeType_t c, cudaDataType_t s) { CS_LT(cublasLtMatmulDescCreate(&h, c, s)); }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t a, const T& v) {
    CS_LT(cublasLtMatmulDescSetAttribute(h, a, &v, sizeof(v)));
  }
};
struct Layout : LtOwner<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> {
  Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld) {
    CS_LT(cublasLtMatrixLayoutCreate(&h, t, rows, cols, ld));
  }
};
struct Preference : LtOwner<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> {
  Preference() { CS_LT(cublasLtMatmulPreferenceCreate(&h)); }
};

__global__ void gen_normal(float* out, int64_t n, uint64_t seed) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const double u1 = (scalar::random_bits(seed, 2 * i) + 1.0) * 0x1p-32;
    const double u2 = scalar::random_bits(seed, 2 * i + 1) * 0x1p-32;
    out[i] = static_cast<float>(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
  }
}

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) out[i] = __float2bfloat16_rn(in[i]);
}

// Absolute maximum of every (row, 128-column block) x (rb-row block): per-block amax as float bits.
__global__ void block_amax(const float* x, int64_t rows, int64_t cols, int rb, int cb,
                           unsigned* amax, int64_t bcols) {
  for (int64_t i = grid_start(); i < rows * cols; i += grid_stride()) {
    const int64_t r = i / cols, c = i % cols;
    atomicMax(&amax[(r / rb) * bcols + c / cb], __float_as_uint(fabsf(x[i])));
  }
}

// e4m3 codes of x / scale with the shared encoder (round to nearest even, saturate).
__global__ void quantize_e4m3(const float* x, int64_t rows, int64_t cols, int rb, int cb,
                              const unsigned* amax, int64_t bcols, scalar::Format f, uint8_t* out,
                              float* scales_out) {
  for (int64_t i = grid_start(); i < rows * cols; i += grid_stride()) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t b = (r / rb) * bcols + c / cb;
    const float a = __uint_as_float(amax[b]);
    const float s = a > 0 ? a / 448.0f : 1.0f;
    if (scales_out && r % rb == 0 && c % cb == 0) scales_out[b] = s;
    out[i] = static_cast<uint8_t>(
        scalar::encode(scalar::quantize(static_cast<double>(x[i]) / s, f, scalar::Round::Even,
                                        scalar::Overflow::Saturate, 0),
                       f));
  }
}

// Scatters per-block scales [rowblock][kblock] into the layout cuBLASLt reads:
// out[r * stride_r + kb * stride_k]. 1x128 (VEC128_32F): outer dimension contiguous
// (stride_r 1, stride_k rows). 128x128 (BLK128x128_32F): K blocks contiguous, each row of blocks
// padded to a multiple of 4 K blocks (stride_r round_up(kblocks, 4), stride_k 1).
__global__ void scatter_scales(const float* s, int64_t rblocks, int64_t kblocks, int64_t stride_r,
                               int64_t stride_k, float* out) {
  for (int64_t i = grid_start(); i < rblocks * kblocks; i += grid_stride()) {
    const int64_t r = i / kblocks, kb = i % kblocks;
    out[r * stride_r + kb * stride_k] = s[i];
  }
}

// An fp8 code of v, rounded to nearest even and saturated.
__device__ uint8_t fp8_code(double v, scalar::Format fp8) {
  return static_cast<uint8_t>(scalar::encode(
      scalar::quantize(v, fp8, scalar::Round::Even, scalar::Overflow::Saturate, 0), fp8));
}

// The two terms of element i of a TCFP cast operand (rows x k, a group per 32 along k): hi (code
// and scale) and lo (residual and its scale), as values.
struct TcfpTerms {
  double hi, lo;
};
__device__ TcfpTerms tcfp_terms(const uint8_t* codes, const uint8_t* scale, const uint8_t* res,
                                const uint8_t* rscale, int64_t i, int64_t k, scalar::Format fp8,
                                scalar::Format resf) {
  const int64_t g = i / k * (k / 32) + i % k / 32;
  return {scalar::value_of(scalar::decode(codes[i], fp8), static_cast<int>(scale[g]) - 127),
          scalar::value_of(scalar::decode(res[i], resf), static_cast<int>(rscale[g]) - 127)};
}

// TCFP operand folding: from the TCFP cast codes of an operand (rows x k), writes the row of the
// tripled-K operand: hi | hi/16 | lo (A order) or hi | lo | hi/16 (B order), as e4m3 at scale 2^S.
__global__ void tcfp_fold(const uint8_t* codes, const uint8_t* scale, const uint8_t* res,
                          const uint8_t* rscale, int64_t rows, int64_t k, int shift_s,
                          scalar::Format fp8, scalar::Format resf, bool b_order, uint8_t* out) {
  for (int64_t i = grid_start(); i < rows * k; i += grid_stride()) {
    const int64_t r = i / k, c = i % k;
    const auto [hi, lo] = tcfp_terms(codes, scale, res, rscale, i, k, fp8, resf);
    const uint8_t h = fp8_code(hi * scalar::pow2(-shift_s), fp8),
                  h16 = fp8_code(hi * scalar::pow2(-shift_s - 4), fp8),
                  l = fp8_code(lo * scalar::pow2(-(shift_s - 4)), fp8);
    uint8_t* row = out + r * 3 * k;
    row[c] = h;
    row[k + c] = b_order ? l : h16;
    row[2 * k + c] = b_order ? h16 : l;
  }
}

// FP8 activations for the TCFP-12 weight GEMM, in one pass over x: row r of the [rows, 2k]
// operand is [x / s | x / (16 s)] as e4m3 codes (s = absmax / 448), the second half the partner
// of the weights' residual term, which is folded 16 times larger (tcfp_fold_weights).
__global__ void quantize_e4m3_twice(const float* x, int64_t rows, int64_t k, const unsigned* amax,
                                    scalar::Format f, uint8_t* out, float* scale_out) {
  const float a = __uint_as_float(*amax);
  const float s = a > 0 ? a / 448.0f : 1.0f;
  for (int64_t i = grid_start(); i < rows * k; i += grid_stride()) {
    if (i == 0) *scale_out = s;
    const int64_t r = i / k, c = i % k;
    const double v = static_cast<double>(x[i]) / s;
    out[r * 2 * k + c] = fp8_code(v, f);
    out[r * 2 * k + k + c] = fp8_code(v * 0.0625, f);
  }
}

// TCFP-12 weights as the [rows, 2k] operand of that GEMM: hi at the scale 2^S, lo at 2^(S-4).
__global__ void tcfp_fold_weights(const uint8_t* codes, const uint8_t* scale, const uint8_t* res,
                                  const uint8_t* rscale, int64_t rows, int64_t k, int shift_s,
                                  scalar::Format fp8, scalar::Format resf, uint8_t* out) {
  for (int64_t i = grid_start(); i < rows * k; i += grid_stride()) {
    const int64_t r = i / k, c = i % k;
    const auto [hi, lo] = tcfp_terms(codes, scale, res, rscale, i, k, fp8, resf);
    out[r * 2 * k + c] = fp8_code(hi * scalar::pow2(-shift_s), fp8);
    out[r * 2 * k + k + c] = fp8_code(lo * scalar::pow2(-(shift_s - 4)), fp8);
  }
}

__global__ void max_u8(const uint8_t* s, int64_t n, unsigned* out) {
  for (int64_t i = grid_start(); i < n; i += grid_stride())
    if (s[i] != 0xFF) atomicMax(out, static_cast<unsigned>(s[i]));
}

struct Operands {
  LtOperand a, b;               // device operands (bf16 or e4m3 codes) and their scales
  DeviceTensor sa_raw, sb_raw;  // the scales as [rowblock][kblock], for the host check
  int kk = 0;                   // K of the GEMM as run (3k for TCFP)
  float alpha = 1.0f;
  bool fp8 = false, block = false, channel = false;
};

// FP8 operand with per-tensor (rb = rows, cb = cols) or per-block scales laid out for `scaling`.
void fp8_operand(const DeviceTensor& x, int64_t rows, int64_t cols, int rb, int cb, LtScale scaling,
                 LtOperand& opnd, DeviceTensor& raw) {
  const int64_t rblocks = (rows + rb - 1) / rb, cblocks = (cols + cb - 1) / cb;
  DeviceTensor amax = DeviceTensor::empty(DType::U32, {rblocks * cblocks}, true);
  block_amax<<<grid_for(rows * cols, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const float*>(x.data()), rows, cols, rb, cb,
      static_cast<unsigned*>(amax.mutable_data()), cblocks);
  CS_CUDA_LAUNCH("block_amax");
  opnd.data = DeviceTensor::empty(DType::F8E4M3, {rows, cols});
  raw = DeviceTensor::empty(DType::F32, {rblocks * cblocks});
  quantize_e4m3<<<grid_for(rows * cols, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const float*>(x.data()), rows, cols, rb, cb,
      static_cast<const unsigned*>(amax.data()), cblocks, NumberSpec::parse("e4m3fn").format(),
      static_cast<uint8_t*>(opnd.data.mutable_data()), static_cast<float*>(raw.mutable_data()));
  CS_CUDA_LAUNCH("quantize_e4m3");
  opnd.scaling = scaling;
  opnd.scale = scaling == LtScale::Tensor || scaling == LtScale::OuterVec
                   ? raw
                   : lt_block_scales(raw, rblocks, cblocks, scaling, rows);
}

// TCFP operand of random data: cast with the default options, then folded.
DeviceTensor tcfp_operand(const DeviceTensor& x, GemmKind kind, bool b_order, int& shift_s) {
  const DataType d = DataType::parse(kind == GemmKind::TCFP16 ? "tcfp16" : "tcfp12");
  CastOptions o;
  o.mode = CastMode::Actual;
  return tcfp_fold_operand(gpu::cast(x, d, o), kind == GemmKind::TCFP16, b_order, shift_s);
}

// Host check on the leading 64 x 64 block of C: against the fp64 product of the float32 inputs
// the operands were made from (rel_error), and against the fp64 product of the operands as the
// GPU multiplied them, decoded codes times their scales (product_rel_error).
void check_block(const Operands& op, const DeviceTensor& a32, const DeviceTensor& b32,
                 const DeviceTensor& d, bool out_bf16, GemmKind kind, int m, int n, int k,
                 GemmResult& res) {
  const int bm = std::min(m, 64), bn = std::min(n, 64);
  auto fetch = [](const DeviceTensor& t, size_t bytes) {
    std::vector<uint8_t> h(bytes);
    CS_CUDA(cudaMemcpyAsync(h.data(), t.data(), bytes, cudaMemcpyDeviceToHost, stream()));
    return h;
  };
  const size_t esize = out_bf16 ? 2 : 4;
  const std::vector<uint8_t> ha = fetch(a32, size_t(bm) * k * 4),
                             hb = fetch(b32, size_t(bn) * k * 4),
                             hd = fetch(d, size_t(m) * bn * esize);
  const bool tcfp =
      kind == GemmKind::TCFP12 || kind == GemmKind::TCFP16 || kind == GemmKind::TCFP12Weights;
  std::vector<uint8_t> qa, qb, sa, sb;
  if (!tcfp) {
    const size_t eb = op.fp8 ? 1 : 2;
    qa = fetch(op.a.data, size_t(bm) * k * eb);
    qb = fetch(op.b.data, size_t(bn) * k * eb);
    if (op.fp8) {
      sa = fetch(op.sa_raw, size_t(op.sa_raw.numel()) * 4);
      sb = fetch(op.sb_raw, size_t(op.sb_raw.numel()) * 4);
    }
  }
  CS_CUDA(cudaStreamSynchronize(stream()));
  auto f32 = [](const uint8_t* p, size_t i) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  };
  auto bf16 = [](const uint8_t* p, size_t i) {
    const uint32_t u = uint32_t(p[2 * i]) | uint32_t(p[2 * i + 1]) << 8;
    float v;
    const uint32_t w = u << 16;
    std::memcpy(&v, &w, 4);
    return v;
  };
  const scalar::Format e4m3 = NumberSpec::parse("e4m3fn").format();
  std::vector<double> lut(256);
  for (int c = 0; c < 256; ++c) lut[c] = scalar::decode_value(uint32_t(c), e4m3);
  const int64_t kb = k / 128;
  // Decoded operand value times its scale: per-tensor (one scale) or 1x128 / 128x128 blocks.
  auto qval = [&](const std::vector<uint8_t>& q, const std::vector<uint8_t>& s, int row, int t,
                  bool is_b) {
    if (!op.fp8) return double(bf16(q.data(), size_t(row) * k + t));
    double scale = f32(s.data(), 0);
    if (op.block) scale = f32(s.data(), size_t(is_b ? row / 128 : row) * kb + t / 128);
    if (op.channel) scale = f32(s.data(), size_t(row));
    return lut[q[size_t(row) * k + t]] * scale;
  };
  double num = 0, den = 0, pnum = 0, pden = 0;
  for (int j = 0; j < bn; ++j)
    for (int i = 0; i < bm; ++i) {
      double ref = 0, pref = 0;
      for (int t = 0; t < k; ++t) {
        ref += double(f32(ha.data(), size_t(i) * k + t)) * f32(hb.data(), size_t(j) * k + t);
        if (!tcfp) pref += qval(qa, sa, i, t, false) * qval(qb, sb, j, t, true);
      }
      const size_t at = size_t(j) * m + i;
      const double got = out_bf16 ? bf16(hd.data(), at) : f32(hd.data(), at);
      num += (got - ref) * (got - ref);
      den += ref * ref;
      pnum += (got - pref) * (got - pref);
      pden += pref * pref;
    }
  auto rel = [](double a, double b) {
    const double r = b > 0 ? std::sqrt(a / b) : 0.0;
    return std::isfinite(r) ? r : std::numeric_limits<double>::infinity();
  };
  res.rel_error = rel(num, den);
  if (!tcfp) res.product_rel_error = rel(pnum, pden);
}

}  // namespace

namespace gpu::detail {

DeviceTensor lt_block_scales(const DeviceTensor& raw, int64_t rblocks, int64_t kblocks,
                             LtScale layout, int64_t rows_padded) {
  if (raw.numel() != rblocks * kblocks)
    throw Error("block scales: " + std::to_string(raw.numel()) + " values for " +
                std::to_string(rblocks) + " x " + std::to_string(kblocks) + " blocks");
  const bool vec = layout == LtScale::Vec128;
  const int64_t k4 = (kblocks + 3) / 4 * 4;
  const int64_t rows = vec ? std::max(rows_padded, rblocks) : rblocks;
  const int64_t stride_r = vec ? 1 : k4, stride_k = vec ? rows : 1;
  // Zeros in the padding: padded rows hold zero codes, so their scale never matters.
  DeviceTensor out = DeviceTensor::empty(DType::F32, {vec ? rows * kblocks : rblocks * k4}, true);
  scatter_scales<<<grid_for(rblocks * kblocks, 256, 1 << 12), 256, 0, stream()>>>(
      static_cast<const float*>(raw.data()), rblocks, kblocks, stride_r, stride_k,
      static_cast<float*>(out.mutable_data()));
  CS_CUDA_LAUNCH("scatter_scales");
  return out;
}

DeviceTensor to_bf16(const DeviceTensor& f32) {
  DeviceTensor out = DeviceTensor::empty(DType::BF16, f32.shape());
  to_bf16_kernel<<<grid_for(f32.numel(), 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const float*>(f32.data()), static_cast<__nv_bfloat16*>(out.mutable_data()),
      f32.numel());
  CS_CUDA_LAUNCH("to_bf16");
  return out;
}

DeviceTensor tcfp_fold_operand(const DeviceCastResult& r, bool tcfp16, bool b_order, int& shift_s) {
  if (r.shape.size() != 2 || !r.codes || !r.residual || r.shape[1] % 32)
    throw Error(
        "TCFP operand: needs an actual TCFP cast of a [rows, k] tensor, k a multiple of 32");
  DeviceTensor mx = DeviceTensor::empty(DType::U32, {1}, true);
  max_u8<<<grid_for(r.scale.numel(), 256, 1 << 12), 256, 0, stream()>>>(
      static_cast<const uint8_t*>(r.scale.data()), r.scale.numel(),
      static_cast<unsigned*>(mx.mutable_data()));
  CS_CUDA_LAUNCH("max_u8");
  const unsigned top = mx.download().ptr<unsigned>()[0];
  shift_s = static_cast<int>(top) - 127;
  const int64_t rows = r.shape[0], k = r.shape[1];
  DeviceTensor out = DeviceTensor::empty(DType::F8E4M3, {rows, 3 * k});
  const scalar::Format fp8 = NumberSpec::parse("e4m3fn").format();
  const scalar::Format resf = tcfp16 ? fp8 : NumberSpec::parse("int4").format();
  tcfp_fold<<<grid_for(rows * k, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const uint8_t*>(r.codes.data()), static_cast<const uint8_t*>(r.scale.data()),
      static_cast<const uint8_t*>(r.residual.data()),
      static_cast<const uint8_t*>(r.residual_scale.data()), rows, k, shift_s, fp8, resf, b_order,
      static_cast<uint8_t*>(out.mutable_data()));
  CS_CUDA_LAUNCH("tcfp_fold");
  return out;
}

DeviceTensor tcfp_fold_weights_operand(const DeviceCastResult& r, int& shift_s) {
  if (r.shape.size() != 2 || !r.codes || !r.residual || r.shape[1] % 32)
    throw Error(
        "TCFP-12 weights: needs an actual TCFP-12 cast of a [rows, k] tensor, k a multiple "
        "of 32");
  DeviceTensor mx = DeviceTensor::empty(DType::U32, {1}, true);
  max_u8<<<grid_for(r.scale.numel(), 256, 1 << 12), 256, 0, stream()>>>(
      static_cast<const uint8_t*>(r.scale.data()), r.scale.numel(),
      static_cast<unsigned*>(mx.mutable_data()));
  CS_CUDA_LAUNCH("max_u8");
  shift_s = static_cast<int>(mx.download().ptr<unsigned>()[0]) - 127;
  const int64_t rows = r.shape[0], k = r.shape[1];
  DeviceTensor out = DeviceTensor::empty(DType::F8E4M3, {rows, 2 * k});
  tcfp_fold_weights<<<grid_for(rows * k, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const uint8_t*>(r.codes.data()), static_cast<const uint8_t*>(r.scale.data()),
      static_cast<const uint8_t*>(r.residual.data()),
      static_cast<const uint8_t*>(r.residual_scale.data()), rows, k, shift_s,
      NumberSpec::parse("e4m3fn").format(), NumberSpec::parse("int4").format(),
      static_cast<uint8_t*>(out.mutable_data()));
  CS_CUDA_LAUNCH("tcfp_fold_weights");
  return out;
}

namespace {
cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::F8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      throw Error(std::string("cuBLASLt operand: unsupported element type ") + dtype_name(t));
  }
}

int32_t lt_scale_mode(LtScale s) {
  return s == LtScale::Vec128     ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
         : s == LtScale::OuterVec ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                  : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
}
}  // namespace

struct LtProduct::Impl {
  LtOperand a, b;
  LtGemm g;
  LtHandle lt;
  MatmulDesc desc{CUBLAS_COMPUTE_32F, CUDA_R_32F};
  std::unique_ptr<Layout> la, lb, lc;
  cublasLtMatmulAlgo_t algo{};
  size_t ws_bytes = size_t{64} << 20;
  DeviceTensor ws;
  int chosen = 0, candidates = 1;
};

LtProduct::LtProduct(const LtOperand& a, const LtOperand& b, const LtGemm& g) : impl_(new Impl) {
  Impl& p = *impl_;
  try {
    p.a = a, p.b = b, p.g = g;
    const cudaDataType_t ta = lt_type(a.data.dtype()), tb = lt_type(b.data.dtype());
    const bool fp8 = a.data.dtype() == DType::F8E4M3 || a.data.dtype() == DType::F8E5M2;
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    p.desc.set(CUBLASLT_MATMUL_DESC_TRANSA, opT);
    p.desc.set(CUBLASLT_MATMUL_DESC_TRANSB, opN);
    if (a.scaling != LtScale::None)
      p.desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a.scale.data());
    if (b.scaling != LtScale::None)
      p.desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b.scale.data());
    if (a.scaling != LtScale::None && a.scaling != LtScale::Tensor)
      p.desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, lt_scale_mode(a.scaling));
    if (b.scaling != LtScale::None && b.scaling != LtScale::Tensor)
      p.desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, lt_scale_mode(b.scaling));
    if (fp8) {
      const int8_t fast = g.fast_accum ? 1 : 0;
      p.desc.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
    }
    const cudaDataType_t out_t = g.bf16_output ? CUDA_R_16BF : CUDA_R_32F;
    p.la = std::make_unique<Layout>(ta, g.k, g.m, g.k);
    p.lb = std::make_unique<Layout>(tb, g.k, g.n, g.k);
    p.lc = std::make_unique<Layout>(out_t, g.m, g.n, g.m);
    p.ws = DeviceTensor::empty(DType::U8, {static_cast<int64_t>(p.ws_bytes)});
    Preference pref;
    CS_LT(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &p.ws_bytes, sizeof(p.ws_bytes)));
    const int want = std::max(1, std::min(g.autotune, 32));
    std::vector<cublasLtMatmulHeuristicResult_t> heur(static_cast<size_t>(want));
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
        p.lt.h, p.desc.h, p.la->h, p.lb->h, p.lc->h, p.lc->h, pref.h, want, heur.data(), &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
      throw Error("cuBLASLt found no algorithm for the " + g.what + " GEMM " + std::to_string(g.m) +
                  "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + " on this GPU (" +
                  cublasLtGetStatusString(hs) + ")");
    p.algo = heur[0].algo;
    p.candidates = found;
    if (found > 1) {
      // Time each candidate on a scratch output; the heuristic's first choice is not always the
      // fastest for large square products.
      DeviceTensor d = make_output();
      double best = 0;
      for (int c = 0; c < found; ++c) {
        p.algo = heur[static_cast<size_t>(c)].algo;
        float t = 0;
        try {
          launch(d);
          cudaEvent_t e0, e1;
          CS_CUDA(cudaEventCreate(&e0));
          CS_CUDA(cudaEventCreate(&e1));
          CS_CUDA(cudaEventRecord(e0, stream()));
          for (int i = 0; i < 3; ++i) launch(d);
          CS_CUDA(cudaEventRecord(e1, stream()));
          CS_CUDA(cudaEventSynchronize(e1));
          CS_CUDA(cudaEventElapsedTime(&t, e0, e1));
          cudaEventDestroy(e0);
          cudaEventDestroy(e1);
        } catch (const Error&) {
          continue;  // a candidate that cannot run here is skipped
        }
        if (best == 0 || t < best) best = t, p.chosen = c;
      }
      p.algo = heur[static_cast<size_t>(p.chosen)].algo;
    }
  } catch (...) {
    delete impl_;
    throw;
  }
}

LtProduct::~LtProduct() {
  delete impl_;
}

DeviceTensor LtProduct::make_output() const {
  const LtGemm& g = impl_->g;
  return DeviceTensor::empty(g.bf16_output ? DType::BF16 : DType::F32, {g.n, g.m});
}

std::string LtProduct::algo_note() const {
  if (impl_->candidates <= 1) return "";
  return "fastest of " + std::to_string(impl_->candidates) + " cuBLASLt candidates (#" +
         std::to_string(impl_->chosen) + ")";
}

void LtProduct::launch(DeviceTensor& d) const {
  const Impl& p = *impl_;
  CS_LT(cublasLtMatmul(p.lt.h, p.desc.h, &p.g.alpha, p.a.data.data(), p.la->h, p.b.data.data(),
                       p.lb->h, &p.g.beta, d.data(), p.lc->h, d.mutable_data(), p.lc->h, &p.algo,
                       p.ws.data() ? const_cast<void*>(p.ws.data()) : nullptr, p.ws_bytes,
                       stream()));
}

DeviceTensor lt_matmul(const LtOperand& a, const LtOperand& b, const LtGemm& g, JobControl* job,
                       double* ms, std::string* algo) {
  LtProduct prod(a, b, g);
  if (algo) *algo = prod.algo_note();
  DeviceTensor d = g.accumulate ? g.accumulate : prod.make_output();
  const double t = time_ms([&] { prod.launch(d); }, g.warmup, std::max(1, g.iters), job);
  if (ms) *ms = t;
  return d;
}

}  // namespace gpu::detail

int gemm_compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (!gpu::available(nullptr) || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

bool gemm_available(std::string* reason) {
  std::string why;
  if (!gpu::available(&why)) {
    if (reason) *reason = why;
    return false;
  }
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    if (reason) *reason = "cannot read the GPU's compute capability";
    return false;
  }
  if (major * 10 + minor < 89) {
    if (reason)
      *reason = "the GPU has no FP8 tensor cores (compute capability " + std::to_string(major) +
                "." + std::to_string(minor) + ", FP8 needs 8.9 or newer)";
    return false;
  }
  return true;
}

GemmResult run_gemm(GemmKind kind, const GemmOptions& opt, JobControl* job) {
  std::string why;
  if (!gemm_available(&why)) throw Error("GEMM unavailable: " + why);
  if (kind == GemmKind::MXFP8Block || kind == GemmKind::NVFP4Block) {
    const std::string mode = kind == GemmKind::MXFP8Block
                                 ? "MXFP8 (32-value e8m0 scales, cuBLASLt VEC32_UE8M0)"
                                 : "NVFP4 (16-value e4m3 scales, cuBLASLt VEC16_UE4M3)";
    throw Error("the " + mode +
                " block-scaled GEMM needs an sm_100 (Blackwell) GPU: its scales are applied by "
                "the 5th-generation tensor cores, which this GPU (sm_" +
                std::to_string(gemm_compute_capability()) +
                ") does not have; CastScope does not emulate it");
  }
  const int m = opt.m, n = opt.n, k = opt.k;
  const int align = kind == GemmKind::FP8Block ? 128 : kind == GemmKind::FP8Channel ? 16 : 32;
  if (m <= 0 || n <= 0 || k <= 0 || m % 16 || n % 16 || k % align)
    throw Error("GEMM sizes must be positive, m and n multiples of 16 and k a multiple of " +
                std::to_string(align) + " (got " + std::to_string(m) + "x" + std::to_string(n) +
                "x" + std::to_string(k) + ")");
  if (job) job->check();
  GemmResult res;
  res.kind = kind;
  res.m = m, res.n = n, res.k = k;
  // Random N(0,1) operands: A as m x k rows, B as n x k rows (B's columns, K contiguous).
  DeviceTensor a32 = DeviceTensor::empty(DType::F32, {m, k}),
               b32 = DeviceTensor::empty(DType::F32, {n, k});
  gen_normal<<<grid_for(int64_t{m} * k, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<float*>(a32.mutable_data()), int64_t{m} * k, opt.seed * 2 + 1);
  gen_normal<<<grid_for(int64_t{n} * k, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<float*>(b32.mutable_data()), int64_t{n} * k, opt.seed * 2 + 2);
  CS_CUDA_LAUNCH("gen_normal");

  Operands op;
  op.kk = k;
  switch (kind) {
    case GemmKind::BF16:
      op.a.data = gpu::detail::to_bf16(a32);
      op.b.data = gpu::detail::to_bf16(b32);
      break;
    case GemmKind::FP8:
      op.fp8 = true;
      fp8_operand(a32, m, k, m, k, LtScale::Tensor, op.a, op.sa_raw);
      fp8_operand(b32, n, k, n, k, LtScale::Tensor, op.b, op.sb_raw);
      break;
    case GemmKind::FP8Block:
      op.fp8 = op.block = true;
      fp8_operand(a32, m, k, 1, 128, LtScale::Vec128, op.a, op.sa_raw);
      fp8_operand(b32, n, k, 128, 128, LtScale::Blk128x128, op.b, op.sb_raw);
      break;
    case GemmKind::TCFP12:
    case GemmKind::TCFP16: {
      op.fp8 = true;
      int sa = 0, sb = 0;
      op.a.data = tcfp_operand(a32, kind, false, sa);
      op.b.data = tcfp_operand(b32, kind, true, sb);
      op.kk = 3 * k;
      op.alpha = static_cast<float>(std::ldexp(1.0, sa + sb));
      break;
    }
    case GemmKind::FP8Channel:
      op.fp8 = op.channel = true;
      fp8_operand(a32, m, k, 1, k, LtScale::OuterVec, op.a, op.sa_raw);
      fp8_operand(b32, n, k, 1, k, LtScale::OuterVec, op.b, op.sb_raw);
      break;
    case GemmKind::TCFP12Weights: {
      // Activations: one pass writes both halves; weights: the TCFP-12 cast's two terms.
      op.fp8 = true;
      DeviceTensor amax = DeviceTensor::empty(DType::U32, {1}, true);
      block_amax<<<grid_for(int64_t{m} * k, 256, 1 << 16), 256, 0, stream()>>>(
          static_cast<const float*>(a32.data()), m, k, m, k,
          static_cast<unsigned*>(amax.mutable_data()), 1);
      CS_CUDA_LAUNCH("block_amax");
      op.a.data = DeviceTensor::empty(DType::F8E4M3, {m, 2 * int64_t{k}});
      op.sa_raw = DeviceTensor::empty(DType::F32, {1});
      quantize_e4m3_twice<<<grid_for(int64_t{m} * k, 256, 1 << 16), 256, 0, stream()>>>(
          static_cast<const float*>(a32.data()), m, k, static_cast<const unsigned*>(amax.data()),
          NumberSpec::parse("e4m3fn").format(), static_cast<uint8_t*>(op.a.data.mutable_data()),
          static_cast<float*>(op.sa_raw.mutable_data()));
      CS_CUDA_LAUNCH("quantize_e4m3_twice");
      op.a.scale = op.sa_raw;
      op.a.scaling = LtScale::Tensor;
      int sb = 0;
      CastOptions co;
      co.mode = CastMode::Actual;
      op.b.data =
          gpu::detail::tcfp_fold_weights_operand(gpu::cast(b32, DataType::parse("tcfp12"), co), sb);
      op.kk = 2 * k;
      op.alpha = static_cast<float>(std::ldexp(1.0, sb));
      break;
    }
    case GemmKind::MXFP8Block:
    case GemmKind::NVFP4Block:
      break;  // refused above
  }

  // fp32 C by default: a bf16 output would round away the accuracy TCFP-16 buys.
  const bool tcfp = kind == GemmKind::TCFP12 || kind == GemmKind::TCFP16;
  const bool out_bf16 = opt.bf16_output && !tcfp;
  const bool weights = kind == GemmKind::TCFP12Weights;
  gpu::detail::LtGemm g;
  g.m = m, g.n = n, g.k = op.kk;
  g.alpha = op.alpha;
  // Fast accumulation (no periodic promotion to fp32) is the throughput setting of the
  // per-tensor and TCFP GEMMs; cuBLASLt has no block-scaled kernel with it, and the block
  // scales are applied at each promotion anyway.
  g.fast_accum = op.fp8 && !op.block;
  g.bf16_output = out_bf16;
  g.warmup = std::max(1, opt.warmup);
  g.iters = std::max(1, opt.iters);
  g.autotune = opt.autotune;
  g.what = to_string(kind);
  DeviceTensor d;
  std::string algo;
  try {
    d = gpu::detail::lt_matmul(op.a, op.b, g, job, &res.ms, &algo);
  } catch (const Error& e) {
    // cuBLASLt has no kernel with fast accumulation for some scale modes: ask without it.
    if (!g.fast_accum || std::string(e.what()).find("no algorithm") == std::string::npos) throw;
    g.fast_accum = false;
    d = gpu::detail::lt_matmul(op.a, op.b, g, job, &res.ms, &algo);
  }
  res.tflops = 2.0 * m * n * double(k) / (res.ms * 1e-3) / 1e12;
  res.note = std::string(op.fp8 ? "e4m3" : "bf16") +
             (op.block ? ", 1x128 A / 128x128 B fp32 block scales" : "") +
             (op.channel ? ", per-row A / per-column B fp32 scales (OUTER_VEC_32F)" : "") +
             (tcfp ? ", one FP8 GEMM over 3k" : "") +
             (weights ? ", TCFP-12 weights x e4m3 activations, one FP8 GEMM over 2k" : "") +
             (op.fp8 ? (g.fast_accum ? ", fast accumulation" : ", fp32 accumulation") : "") +
             (out_bf16 ? ", bf16 output" : ", fp32 output") + (algo.empty() ? "" : ", " + algo);
  if (opt.check) check_block(op, a32, b32, d, out_bf16, kind, m, n, k, res);
  return res;
}

}  // namespace castscope
