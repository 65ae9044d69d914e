// The TCFP cast kernel (tcfp_block.hpp's block cast on the device).
#pragma once

#include <type_traits>

#include "backends/cuda/cast_kernels.cuh"

namespace castscope::gpu::detail {

// TCFP: a warp casts 32 blocks of 32 values at a time through shared memory, calling the same
// functions as tcb::cast_block in the same order. First one lane per block: its statistics and
// main scale, with the NormalFloat sums added in index order as the CPU adds them. Then one lane
// per element: both terms' codes, the residual scale from a warp maximum (exact in any order).
// One thread per block with 32-entry arrays (the first version) ran from local memory, whose
// traffic filled DRAM at 6% of the copy bandwidth; one lane per element with the sums read
// across lanes by shuffles spent a dozen warp instructions per element on them.
constexpr int kTcfpThreads = 256;

__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// FAST (round to nearest even, codes only, float32 / float16 / bfloat16 input, e4m3fn terms):
// the terms' codes by the float code functions the MX kernels use instead of the shared double
// quantizer with a run-time format, which cost most of the kernel's time. Exact because
// - the main term's input x * 2^-shift is a power-of-two scaling of a float (exact; a product
//   below float's normal range is far below e4m3's smallest quantum and codes as a signed zero
//   both ways), and code_e4m3fn equals the shared quantizer on every float;
// - the residual x - main term is computed in double as before, and fits a float: the main
//   term's quantum is coarser than x's unit in the last place and the residual is no larger
//   than x, so it has at most x's 24 significant bits; times 2^-rshift it is a float whose code
//   quantize_rne_f32 (any fast_quant_ok grid, checked against the shared quantizer on every
//   float) or code_e4m3fn gives.
template <class T, bool FAST>
__global__ void __launch_bounds__(kTcfpThreads)
    tcfp_warp_kernel(const T* __restrict__ x, int64_t C, int64_t gc, int64_t groups,
                     tcb::BlockParams bp, Scratch* s, Outs o) {
  static_assert(!FAST || !std::is_same<T, double>::value, "the fast path takes float input");
  if constexpr (FAST) bp.fp8 = static_format(kE4M3FN);
  // Every input type but double is exact in float, which halves the tile.
  using S = typename std::conditional<std::is_same<T, double>::value, double, float>::type;
  constexpr int W = tcb::kBlock;
  constexpr int kWarps = sizeof(S) == 8 ? kTcfpThreads / 64 : kTcfpThreads / 32;
  __shared__ S tiles[kWarps][W][W + 1];  // +1: lane-per-block reads hit distinct banks
  const int lane = threadIdx.x & 31;
  S(*t)[W + 1] = tiles[threadIdx.x >> 5];
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t nwarps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const uint32_t nanc = (1u << bp.e8m0.bits) - 1;
  const bool nf = bp.variant == tcb::Variant::T8 && bp.nf_aware;
  unsigned clipped = 0, nonfinite = 0;
  for (int64_t g0 = warp * W; g0 < groups; g0 += nwarps * W) {
    // Block g0 + u's row and first column, stepped along rather than divided out per block (two
    // 64-bit divisions per element were a large share of the kernel's instructions).
    const int64_t row0 = g0 / gc, cb0 = g0 % gc;
    int64_t row = row0, cb = cb0;
#pragma unroll 8
    for (int u = 0; u < W; ++u) {
      const int64_t g = g0 + u, c0 = cb * W;
      // float32 / float16 / bfloat16 widen to float directly (exact), not through double.
      t[u][lane] = g < groups && c0 + lane < C ? static_cast<S>(x[row * C + c0 + lane]) : S(0);
      if (++cb == gc) cb = 0, ++row;
    }
    __syncwarp();
    // Lane per block.
    uint32_t my_scale = 0;
    int my_n = 0;
    bool my_nan = false;
    if (g0 + lane < groups) {
      const int64_t c0 = ((g0 + lane) % gc) * W;
      my_n = C - c0 < W ? static_cast<int>(C - c0) : W;
      double absmax = 0;
      for (int i = 0; i < my_n; ++i) {
        const double v = t[lane][i];
        if (!(v - v == 0))
          my_nan = true;
        else
          absmax = fabs(v) > absmax ? fabs(v) : absmax;
      }
      if (my_nan) {
        my_scale = nanc;
      } else {
        const double target = tcb::main_target_of(
            [&](int i) { return static_cast<double>(t[lane][i]); }, my_n, absmax, nf);
        my_scale = tcb::block_scale_code(target, bp.fp8, bp.e8m0);
      }
    }
    // Lane per element.
    row = row0, cb = cb0;
    for (int u = 0; u < W; ++u) {
      const int64_t g = g0 + u;
      if (g >= groups) break;
      // Block u's scale code (at most 8 bits), length and NaN flag in one shuffle.
      const uint32_t b = __shfl_sync(
          0xffffffffu,
          my_scale | static_cast<uint32_t>(my_n) << 16 | static_cast<uint32_t>(my_nan) << 24, u);
      const uint32_t sc = b & 0xFFFFu;
      const int n = static_cast<int>((b >> 16) & 0xFFu);
      const bool bnan = (b >> 24) != 0;
      const int64_t e = row * C + cb * W + lane;
      if (++cb == gc) cb = 0, ++row;
      const bool on = lane < n;
      const S xs = t[u][lane];
      const double xv = xs;
      uint32_t mc = 0, rc = 0, rsc = bnan ? nanc : 0u;
      float val = 0.0f;
      if (bnan) {  // only a NaN block holds non-finite values
        nonfinite += on && !(xv - xv == 0) ? 1 : 0;
        val = canon_nan(scalar::to_f32(castscope::detail::nan_double()));
      } else if constexpr (FAST) {
        const int sh = tcb::shift_of(sc, bp.e8m0);
        const int h1 = -sh / 2;
        bool cl = false;
        mc = code_e4m3fn(static_cast<float>(xs) * pow2f(h1) * pow2f(-sh - h1), cl);
        clipped += on && cl ? 1 : 0;
        if (bp.variant != tcb::Variant::T8) {
          const double resid =
              static_cast<double>(xv) - static_cast<double>(e4m3_value(mc)) * scalar::pow2(sh);
          const double rmax = warp_max(on ? fabs(resid) : 0.0);
          rsc = tcb::block_scale_code(rmax, bp.residual, bp.e8m0);
          const float yr = static_cast<float>(resid * scalar::pow2(-tcb::shift_of(rsc, bp.e8m0)));
          if (bp.variant == tcb::Variant::T16) {
            rc = code_e4m3fn(yr, cl);
          } else {
            const scalar::Quantized rq =
                castscope::detail::canonical(quantize_rne_f32(yr, bp.residual), bp.residual);
            rc = scalar::encode(rq, bp.residual);
          }
        }
      } else {
        const int sh = tcb::shift_of(sc, bp.e8m0);
        const scalar::Quantized q =
            tcb::quantize_term(xv, sh, bp.fp8, bp, static_cast<uint64_t>(e));
        clipped += on && q.clipped ? 1 : 0;
        mc = scalar::encode(q, bp.fp8);
        if (bp.variant != tcb::Variant::T8) {
          const double resid = xv - tcb::term_value(scalar::decode(mc, bp.fp8), sh);
          const double rmax = warp_max(on ? fabs(resid) : 0.0);
          rsc = tcb::block_scale_code(rmax, bp.residual, bp.e8m0);
          const scalar::Quantized rq =
              tcb::quantize_term(resid, tcb::shift_of(rsc, bp.e8m0), bp.residual, bp,
                                 static_cast<uint64_t>(bp.numel + e));
          rc = scalar::encode(rq, bp.residual);
        }
        if (o.values) val = canon_nan(tcb::element_value(bp, false, mc, sc, rc, rsc));
      }
      if (on) {
        if (o.codes) static_cast<uint8_t*>(o.codes)[e] = static_cast<uint8_t>(mc);
        if (o.residual) store_code(o.residual, 1, e, rc, bp.residual);
        if (o.values) o.values[e] = val;
      }
      if (lane == 0) {
        if (o.scale) static_cast<uint8_t*>(o.scale)[g] = static_cast<uint8_t>(sc);
        if (o.rscale) o.rscale[g] = static_cast<uint8_t>(rsc);
      }
    }
    __syncwarp();  // the tile is refilled next
  }
  add_counts(s, clipped, nonfinite, 0);
}

}  // namespace castscope::gpu::detail
