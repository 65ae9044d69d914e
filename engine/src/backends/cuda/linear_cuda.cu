// linear_error()'s two products on the GPU (modelmap/linear_products.hpp). The operands are cast
// exactly as castscope::cast casts them, and the product of the cast operands is one cuBLASLt GEMM
// through gemm_lt.hpp: on the FP8 tensor cores, fed the cast's own codes and scales, for the
// formats they take; as bf16 or fp32 GEMMs of the cast values for every other datatype.
//
// cuBLASLt computes D = A B^T with A [m, k] and B [n, k] both K-contiguous, D stored [n][m]. The
// activations are A (m = tokens) and the weight B (n = out): cuBLASLt's block-scaled mode takes
// 1x128 scales on A and 128x128 scales on B, the DeepSeek-V3 / TransformerEngine recipe. Fast
// accumulation stays off, so the FP8 sums are promoted to fp32 every K block and the output error
// is the casts', not the accumulator's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "castscope/format.hpp"
#include "castscope/matmul.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/gemm_lt.hpp"
#include "modelmap/linear_products.hpp"

namespace castscope::detail {
namespace {

using gpu::DeviceCastResult;
using gpu::DeviceTensor;
using gpu::detail::LtGemm;
using gpu::detail::LtOperand;
using gpu::detail::LtScale;

enum class Path { Generic, Fp8Tensor, Fp8Block, Tcfp12, Tcfp16 };

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int64_t round_up(int64_t v, int64_t to) {
  return (v + to - 1) / to * to;
}

bool is_spec(const NumberSpec& n, const char* name) {
  return n == NumberSpec::parse(name);
}

// e4m3 / e5m2 unscaled or with one float32 scale for the tensor.
bool fp8_tensor(const std::optional<DataType>& d, bool& e5m2) {
  if (!d || !family_traits(d->family()).grammar) return false;
  e5m2 = is_spec(d->number(), "e5m2");
  if (!e5m2 && !is_spec(d->number(), "e4m3fn")) return false;
  if (!d->scaled()) return true;
  return d->tensor_scaled() && !d->scale()->second && is_spec(d->scale()->scale, "float32");
}

// e4m3 with a float32 scale per 1-D tile of 128 along in (two_d false) or per 128x128 tile.
bool fp8_block(const std::optional<DataType>& d, bool two_d) {
  if (!d || !family_traits(d->family()).grammar || !is_spec(d->number(), "e4m3fn") || !d->scaled())
    return false;
  const ScaleSpec& s = *d->scale();
  if (s.second || !is_spec(s.scale, "float32") || s.tiles.size() != (two_d ? 2u : 1u)) return false;
  return std::all_of(s.tiles.begin(), s.tiles.end(),
                     [](const TileSpec& t) { return t.size == 128 && t.sub == 0 && !t.sparse(); });
}

std::string dtype_text(const std::optional<DataType>& d) {
  return d ? d->str() : std::string("float32");
}

// Which product runs; `note` says why the tensor cores do not where they might.
Path choose_path(const LinearErrorOptions& o, int64_t in, std::string& note, std::string& label) {
  const std::optional<DataType>&a = o.act_dtype, &w = o.weight_dtype;
  const std::string pair = dtype_text(a) + " x " + dtype_text(w);
  Path p = Path::Generic;
  int64_t multiple = 0;
  bool e5a = false, e5w = false;
  if (a && w && family_traits(a->family()).tcfp_bits == 12 &&
      family_traits(w->family()).tcfp_bits == 12) {
    p = Path::Tcfp12, multiple = 32, label = "cuBLASLt TCFP-12 (one FP8 GEMM over 3k)";
  } else if (a && w && family_traits(a->family()).tcfp_bits == 16 &&
             family_traits(w->family()).tcfp_bits == 16) {
    p = Path::Tcfp16, multiple = 32, label = "cuBLASLt TCFP-16 (one FP8 GEMM over 3k)";
  } else if (fp8_tensor(a, e5a) && fp8_tensor(w, e5w)) {
    if (e5a && e5w) {
      note = pair + ": cuBLASLt has no FP8 GEMM with both operands e5m2";
      return Path::Generic;
    }
    p = Path::Fp8Tensor, multiple = 16;
    label = std::string("cuBLASLt FP8 ") + (e5a ? "e5m2" : "e4m3") + " x " +
            (e5w ? "e5m2" : "e4m3") + " per-tensor";
  } else if (fp8_block(a, false) && fp8_block(w, true)) {
    p = Path::Fp8Block, multiple = 128, label = "cuBLASLt FP8 block 1x128/128x128";
  } else {
    if (a || w)
      note = pair +
             ": not a pair the tensor cores multiply (FP8 per-tensor, FP8 1x128 x 128x128 "
             "blocks, TCFP-12 / TCFP-16 on both)";
    return Path::Generic;
  }
  std::string why;
  if (!gemm_available(&why)) {
    note = pair + ": " + why;
    return Path::Generic;
  }
  const int cc = gemm_compute_capability();
  if (p == Path::Fp8Block && cc / 10 != 9) {
    note = pair +
           ": cuBLASLt's 1x128 / 128x128 block-scaled FP8 GEMM runs on sm_90 only (this "
           "GPU is sm_" +
           std::to_string(cc) + ")";
    return Path::Generic;
  }
  if (in % multiple) {
    note = label + " needs in-features a multiple of " + std::to_string(multiple) + " (got " +
           std::to_string(in) + ")";
    return Path::Generic;
  }
  return p;
}

__global__ void flag_not_bf16(const float* v, int64_t n, unsigned* flag) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if ((__float_as_uint(v[i]) & 0xFFFFu) && isfinite(v[i])) atomicOr(flag, 1u);
}

// Every finite value has a bfloat16 mantissa, so a bf16 GEMM multiplies exactly these values.
bool bf16_exact(const DeviceTensor& v) {
  DeviceTensor flag = DeviceTensor::empty(DType::U32, {1}, true);
  const auto grid = gpu::detail::grid_for(v.numel(), 256, 1 << 14);
  flag_not_bf16<<<grid, 256, 0, gpu::detail::stream()>>>(
      static_cast<const float*>(v.data()), v.numel(), static_cast<unsigned*>(flag.mutable_data()));
  CS_CUDA_LAUNCH("flag_not_bf16");
  return flag.download().ptr<unsigned>()[0] == 0;
}

// Rows [rows, rows_padded) added as zeros: the FP8 GEMMs want m and n multiples of 16.
DeviceTensor pad_rows(const DeviceTensor& t, int64_t rows, int64_t rows_padded) {
  if (rows == rows_padded) return t;
  const int64_t cols = t.numel() / std::max<int64_t>(rows, 1);
  DeviceTensor out = DeviceTensor::empty(t.dtype(), {rows_padded, cols}, true);
  CS_CUDA(cudaMemcpyAsync(out.mutable_data(), t.data(), t.nbytes(), cudaMemcpyDeviceToDevice,
                          gpu::detail::stream()));
  return out;
}

struct CastOperand {
  DeviceCastResult r;  // codes and scales (Actual) or values (Virtual)
  DeviceTensor values;
  double snr_db = std::numeric_limits<double>::infinity();
  std::string backend;
};

// The cast as castscope::cast makes it. A rotation is applied by castscope::cast only, so a
// rotated operand is cast there (still on the GPU) and its outputs uploaded; they hold the
// rotated codes, and the same R on both operands leaves x W^T unchanged.
CastOperand cast_operand(const Tensor& host, const DeviceTensor& dev,
                         const std::optional<DataType>& d, const CastOptions& co) {
  CastOperand c;
  if (!d) {
    c.values = dev;
    return c;
  }
  if (!co.rotate.enabled()) {
    c.r = gpu::cast(dev, *d, co, true);
    c.values = c.r.values;
    c.backend = "cuda";
    c.snr_db = gpu::compute_stats(dev, c.values, c.r.counts.clipped).snr_db;
    return c;
  }
  const CastResult h = cast(host, *d, co);
  auto up = [](const Tensor& t) { return t ? DeviceTensor::upload(t) : DeviceTensor(); };
  c.r.shape = h.shape;
  c.r.mode = h.mode;
  c.r.codes = up(h.codes);
  c.r.scale = up(h.scale);
  c.r.residual = up(h.residual);
  c.r.residual_scale = up(h.residual_scale);
  const Tensor values = h.mode == CastMode::Virtual ? h.values : upcast(h);
  c.values = DeviceTensor::upload(values);
  c.backend = h.backend;
  c.snr_db = compute_stats(host, values, h.counts.clipped).snr_db;
  return c;
}

// FP8 operand from an Actual cast: codes padded to rows_padded rows, scales as cuBLASLt reads them.
LtOperand fp8_operand(const DeviceCastResult& r, int64_t rows, int64_t rows_padded, int64_t k,
                      LtScale scaling) {
  if (r.codes.dtype() != DType::F8E4M3 && r.codes.dtype() != DType::F8E5M2)
    throw Error(std::string("FP8 GEMM operand: the cast gave ") + dtype_name(r.codes.dtype()) +
                " codes");
  LtOperand op;
  op.scaling = scaling;
  op.data = pad_rows(r.codes, rows, rows_padded);
  if (scaling == LtScale::Tensor) {
    if (r.scale) {
      if (r.scale.numel() != 1 || r.scale.dtype() != DType::F32)
        throw Error("FP8 GEMM operand: expected one float32 tensor scale");
      op.scale = r.scale;
    } else {
      Tensor one = Tensor::empty(DType::F32, {1});
      one.mutable_ptr<float>()[0] = 1.0f;
      op.scale = DeviceTensor::upload(one);
    }
    return op;
  }
  const int64_t kb = k / 128, rb = scaling == LtScale::Vec128 ? rows : (rows + 127) / 128;
  if (r.scale.dtype() != DType::F32) throw Error("FP8 GEMM operand: expected float32 block scales");
  op.scale = gpu::detail::lt_block_scales(r.scale, rb, kb, scaling, rows_padded);
  return op;
}

// The product of the cast operands on the FP8 tensor cores. m_ld receives the padded token count
// (D's leading dimension).
DeviceTensor tensor_core_product(Path path, const CastOperand& cx, const CastOperand& cw,
                                 int64_t tokens, int64_t out, int64_t in, int iters,
                                 const std::string& label, JobControl* job, int64_t& m_ld,
                                 double& ms) {
  LtGemm g;
  g.k = in;
  g.warmup = 1;
  g.iters = std::max(1, iters);
  g.what = label;
  // FP8 GEMMs want m and n multiples of 16; the block-scaled one gets whole 128-row blocks, the
  // shapes its scale layouts were checked at.
  const int64_t pad = path == Path::Fp8Block ? 128 : 16;
  m_ld = round_up(tokens, pad);
  const int64_t n_ld = round_up(out, pad);
  LtOperand qa, qb;
  if (path == Path::Fp8Tensor || path == Path::Fp8Block) {
    const bool block = path == Path::Fp8Block;
    qa = fp8_operand(cx.r, tokens, m_ld, in, block ? LtScale::Vec128 : LtScale::Tensor);
    qb = fp8_operand(cw.r, out, n_ld, in, block ? LtScale::Blk128x128 : LtScale::Tensor);
  } else {
    const bool t16 = path == Path::Tcfp16;
    int sa = 0, sb = 0;
    qa.data = pad_rows(gpu::detail::tcfp_fold_operand(cx.r, t16, false, sa), tokens, m_ld);
    qb.data = pad_rows(gpu::detail::tcfp_fold_operand(cw.r, t16, true, sb), out, n_ld);
    g.k = 3 * in;
    g.alpha = static_cast<float>(std::ldexp(1.0, sa + sb));
  }
  g.m = m_ld, g.n = n_ld;
  return gpu::detail::lt_matmul(qa, qb, g, job, &ms);
}

// D [n_ld rows][m_ld] (cuBLASLt's output) to y [tokens, out].
Tensor to_tokens_by_out(const Tensor& d, int64_t tokens, int64_t out, int64_t m_ld) {
  return transposed_f32(d.ptr<float>(), tokens, out, m_ld);
}

}  // namespace

LinearProducts linear_products_cuda(const Tensor& x, const Tensor& w, const LinearErrorOptions& o,
                                    JobControl* job, LinearReuse::State* reuse) {
  std::string why;
  if (!gpu::available(&why)) throw Error("linear layer on the GPU: " + why);
  LinearProducts p;
  const int64_t tokens = x.shape()[0], in = x.shape()[1], out = w.shape()[0];
  std::string label;
  const Path path = choose_path(o, in, p.product_note, label);

  const auto t0 = std::chrono::steady_clock::now();
  // An operand the reuse holds is not uploaded again (the model map's columns share them).
  auto operand = [&](const Tensor& host, exec::PlacedTensor LinearReuse::State::*slot) {
    if (reuse && reuse->*slot) return (reuse->*slot).dev();
    DeviceTensor d = DeviceTensor::upload(host);
    if (reuse) {
      reuse->*slot = exec::PlacedTensor(d);
      ++reuse->uploads;
    }
    return d;
  };
  const DeviceTensor dx = operand(x, &LinearReuse::State::dx);
  const DeviceTensor dw = operand(w, &LinearReuse::State::dw);
  CastOptions co = o.cast;
  co.axis = -1;
  co.device = Device::CUDA;
  co.mode = path == Path::Generic ? CastMode::Virtual : CastMode::Actual;
  const CastOperand cx = cast_operand(x, dx, o.act_dtype, co);
  if (job) job->check();
  const CastOperand cw = cast_operand(w, dw, o.weight_dtype, co);
  p.act_snr_db = cx.snr_db;
  p.weight_snr_db = cw.snr_db;
  p.cast_ms = ms_since(t0);
  if (job) job->check();

  const auto t1 = std::chrono::steady_clock::now();
  LtGemm ref;
  ref.m = tokens, ref.n = out, ref.k = in;
  ref.what = "fp32 reference";
  LtOperand ax, bw;
  ax.data = dx;
  bw.data = dw;
  double ref_ms = 0;
  DeviceTensor dy;
  if (reuse && reuse->dy) {
    dy = reuse->dy.dev();
    ref_ms = reuse->ref_ms;
  } else {
    dy = gpu::detail::lt_matmul(ax, bw, ref, job, &ref_ms);
    if (reuse) {
      reuse->dy = exec::PlacedTensor(dy);
      reuse->ref_ms = ref_ms;
    }
  }

  // Neither operand cast: the product is the reference itself, not a second GEMM that might sum
  // in another order.
  const bool uncast = !o.act_dtype && !o.weight_dtype;
  int64_t m_ld = tokens;
  DeviceTensor dq = dy;
  p.gemm_ms = ref_ms;
  p.tensor_cores = path != Path::Generic;
  if (p.tensor_cores) {
    try {
      dq = tensor_core_product(path, cx, cw, tokens, out, in, o.gemm_iters, label, job, m_ld,
                               p.gemm_ms);
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      // Shapes or a cuBLASLt build this GPU does not take: the cast values still multiply.
      p.product_note = label + " failed: " + e.what();
      p.tensor_cores = false;
      m_ld = tokens;
    }
  }
  if (!p.tensor_cores && !uncast) {
    LtOperand qa, qb;
    const bool bf16 = bf16_exact(cx.values) && bf16_exact(cw.values);
    qa.data = bf16 ? gpu::detail::to_bf16(cx.values) : cx.values;
    qb.data = bf16 ? gpu::detail::to_bf16(cw.values) : cw.values;
    label = bf16 ? "bf16 (GPU)" : "fp32 (GPU)";
    LtGemm g;
    g.m = tokens, g.n = out, g.k = in;
    g.warmup = 1;
    g.iters = std::max(1, o.gemm_iters);
    g.what = label;
    dq = gpu::detail::lt_matmul(qa, qb, g, job, &p.gemm_ms);
  }
  if (uncast) label = "fp32 (GPU)";
  if (reuse && !reuse->y) reuse->y = to_tokens_by_out(dy.download(), tokens, out, tokens);
  p.y = reuse ? reuse->y : to_tokens_by_out(dy.download(), tokens, out, tokens);
  p.yq = to_tokens_by_out(dq.download(), tokens, out, m_ld);
  p.matmul_ms = ms_since(t1);
  p.product = label;
  return p;
}

}  // namespace castscope::detail
