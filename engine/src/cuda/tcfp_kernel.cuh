// The TCFP cast kernel (tcfp_block.hpp's block cast on the device).
#pragma once

#include "cuda/cast_kernels.cuh"

namespace castscope::gpu::detail {

// TCFP: one warp per 32-value block, one lane per element, calling the same functions as
// tcb::cast_block in the same order. The block's statistics come from shuffles: maxima are exact
// in any order, and the NormalFloat sums read the lanes' values one by one in index order, as
// the CPU adds them. One thread per block (tcfp_kernel) kept 32-entry arrays in local memory;
// its traffic filled DRAM while the cast reached 6% of the copy bandwidth.
__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
template <class T>
__global__ void __launch_bounds__(256)
    tcfp_warp_kernel(const T* __restrict__ x, int64_t C, int64_t gc, int64_t groups,
                     tcb::BlockParams bp, Scratch* s, Outs o) {
  constexpr int U = 4;  // blocks per warp and iteration: their loads are in flight together
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t nwarps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const uint32_t nanc = (1u << bp.e8m0.bits) - 1;
  const bool nf = bp.variant == tcb::Variant::T8 && bp.nf_aware;
  unsigned long long clipped = 0, nonfinite = 0;
  for (int64_t g0 = warp * U; g0 < groups; g0 += nwarps * U) {
    double xs[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t g = g0 + u;
      const int64_t row = g / gc, c0 = (g % gc) * tcb::kBlock;
      xs[u] = g < groups && c0 + lane < C ? Load<T>::get(x, row * C + c0 + lane) : 0.0;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t g = g0 + u;
      if (g >= groups) break;
      const int64_t row = g / gc, c0 = (g % gc) * tcb::kBlock;
      const int n = C - c0 < tcb::kBlock ? static_cast<int>(C - c0) : tcb::kBlock;
      const bool on = lane < n;
      const int64_t e = row * C + c0 + lane;
      const double xv = xs[u];
      const bool bad = on && !(xv - xv == 0);
      nonfinite += bad ? 1 : 0;
      uint32_t mc = 0, rc = 0, sc = 0, rsc = 0;
      float val = 0.0f;
      if (__any_sync(0xffffffffu, bad)) {
        sc = rsc = nanc;
        val = canon_nan(scalar::to_f32(castscope::detail::nan_double()));
      } else {
        const double absmax = warp_max(on ? fabs(xv) : 0.0);
        const double target = tcb::main_target_of(
            [&](int i) { return __shfl_sync(0xffffffffu, xv, i); }, n, absmax, nf);
        sc = tcb::block_scale_code(target, bp.fp8, bp.e8m0);
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
  }
  add_counts(s, clipped, nonfinite, 0);
}

}  // namespace castscope::gpu::detail
