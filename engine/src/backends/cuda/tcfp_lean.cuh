// The lean TCFP kernel: TCFP-8 / 12 / 16 compress casts from float32 or bfloat16 whose blocks of
// 32 lie whole along a contiguous last axis, round to nearest even, codes only. Its results are
// tcb::cast_block's bit for bit (docs/gpu-notes.md v12 has the arguments); it differs from
// tcfp_warp_kernel in how the work is laid out, which left that kernel issue-bound at 11 to 29% of
// the copy bandwidth:
// - lanes take 16-byte chunks of the input as lean_kernel does (a block is 4 lanes of bfloat16 or
//   8 of float32), four loads in flight, so the block's absmax, sums and residual maximum are a
//   lane's own values plus two or three shuffles;
// - TCFP-8's NormalFloat-aware scale comes from float statistics with a rigorous error bound:
//   where the bound leaves the scale code open (every constant block, and blocks whose 3 sigma lies
//   within about 2^-18 of a scale boundary) the block's lanes recompute it with the CPU's double
//   sums, reading the values from each other by shuffles;
// - the main term's residual is formed in float (exact) and the codes are converted two at a time.
#pragma once

#include "backends/cuda/mx_kernel.cuh"
#include "backends/cuda/tcfp_kernel.cuh"

namespace castscope::gpu::detail {

// tcb::block_scale_code of a non-negative float a (the shared function takes its double).
__device__ __forceinline__ uint32_t block_scale_code_f32(float a, const scalar::Format& data,
                                                         const scalar::Format& e8m0) {
  if (!(a > 0.0f)) return 0;
  int e;
  if (data.kind == scalar::Kind::Float) {
    e = select_exponent_f32(a, data, scalar::ScaleMode::TopBinade);
  } else {
    uint32_t m;
    e = binade_f32(a, m);
    if (static_cast<double>(m) * 0x1p-23 > scalar::ldexp_int(data.maxr, data.maxe)) ++e;
  }
  const int code = e - data.emax + e8m0.bias, maxcode = (1 << e8m0.bits) - 2;
  return static_cast<uint32_t>(code < 0 ? 0 : (code > maxcode ? maxcode : code));
}

// Int grids with one quantum 2^qmin and codes up to maxr (TCFP-12's int4 residual, q * 2^-2),
// on which round to nearest even with saturation is one rint and one min.
__host__ __device__ inline bool int_fixed_grid(const scalar::Format& f) {
  return f.kind == scalar::Kind::Int && f.qmin == f.maxe && f.maxbinade + 1 - f.mgrid <= f.qmin &&
         f.maxr < (1u << 23) && f.maxbinade + 2 - f.qmin < 64 &&
         (uint64_t{1} << (f.maxbinade + 2 - f.qmin)) > f.maxr && f.qmin > -100 && f.qmin < 100;
}

// The byte store_code writes for a finite y on such a grid: the signed code, sign-extended.
__device__ __forceinline__ uint32_t int_fixed_byte(float y, float inv_quantum, float maxr) {
  const int r = static_cast<int>(fminf(rintf(fabsf(y) * inv_quantum), maxr));
  return static_cast<uint32_t>(__float_as_uint(y) >> 31 ? -r : r) & 0xFFu;
}

constexpr uint32_t kScaleOpen = 0xFFFFFFFFu;
// Blocks whose absmax is below 2^60: 32 squares of differences up to twice that stay finite.
constexpr uint32_t kNfFloatLimit = (60u + 127u) << 23;

// The NormalFloat-aware scale code of a finite, full block from float statistics: ss is the sum
// of squared differences from the block mean, formed in float with at most five roundings along
// any path of the sums and one for each difference and square, and a the block's absmax
// (< 2^60). Returns kScaleOpen where the code of the CPU's double computation is not settled by
// the bounds. Why the bounds hold (u = 2^-24): the float mean is within 5u * a + 2^-150 of the true
// mean, so the float sum around it exceeds the true sum of squares SS by at most
// 32 * (5u * a + 2^-150)^2 < 2^-36 a^2 + 2^-140; the float roundings move it by at most 8.01u
// relatively plus 2^-143 from results below float's normal range. The CPU's sequential double
// sums are within 34 * 2^-53 relatively (plus 2^-90 a^2) of SS, and its square root and factor 3
// add two more double roundings. A relative margin of 2^-18 on the sum, 2^-20 on the final
// target and the absolute term cover all of these; every bound is itself rounded outward. The
// code is monotone in the target min(3 sigma, absmax), so equal codes at both ends are the code.
// A constant block has SS = 0, so its lower end is 0 and its code is left open: the CPU takes
// the absmax there, not 3 sigma.
__device__ __forceinline__ uint32_t nf_scale_bounded(float ss, float a, const scalar::Format& fp8,
                                                     const scalar::Format& e8m0) {
  const float abs_err = __fadd_ru(__fmul_ru(__fmul_ru(a, a), 0x1p-36f), 0x1p-140f);
  const float lo = fmaxf(__fadd_rd(__fmul_rd(ss, 1.0f - 0x1p-18f), -abs_err), 0.0f);
  const float hi = __fadd_ru(__fmul_ru(ss, 1.0f + 0x1p-18f), abs_err);
  const float tlo =
      __fmul_rd(__fmul_rd(__fsqrt_rd(__fmul_rd(lo, 0.03125f)), 3.0f), 1.0f - 0x1p-20f);
  const float thi =
      __fmul_ru(__fmul_ru(__fsqrt_ru(__fmul_ru(hi, 0.03125f)), 3.0f), 1.0f + 0x1p-20f);
  const uint32_t clo = block_scale_code_f32(fminf(tlo, a), fp8, e8m0);
  const uint32_t chi = block_scale_code_f32(fminf(thi, a), fp8, e8m0);
  return clo == chi ? clo : kScaleOpen;
}

// The sum of a lane's V values and of the other lanes of its block (L lanes, xor butterfly: every
// lane gets the same value). Pairwise inside the lane, so that no path has more than five
// roundings for either layout (bfloat16: 3 + 2, float32: 2 + 3).
template <int V, int L>
__device__ __forceinline__ float block_sum(const float (&v)[V]) {
  float p[V];
#pragma unroll
  for (int k = 0; k < V; ++k) p[k] = v[k];
#pragma unroll
  for (int w = 1; w < V; w <<= 1)
#pragma unroll
    for (int k = 0; k < V; k += 2 * w) p[k] += p[k + w];
  float s = p[0];
#pragma unroll
  for (int m = 1; m < L; m <<= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
  return s;
}

// The CPU's scale target of a finite block of 32 (tcb::main_target_of: double sums in index
// order), each lane of the block fetching the values from the block's lanes in turn. Called by
// the whole warp where the float bounds leave a block's code open. An out-of-line function that
// read the block from global memory instead gave the kernel 108 registers against 62 (ptxas -v).
template <int V, int L>
__device__ __forceinline__ double nf_target_exact(const float (&v)[V], float absmax) {
  const int first = (threadIdx.x & 31) & ~(L - 1);
  auto at = [&](int i) {
    float mine = v[0];
#pragma unroll
    for (int k = 1; k < V; ++k) mine = k == i % V ? v[k] : mine;
    return static_cast<double>(__shfl_sync(0xffffffffu, mine, first + i / V));
  };
  return tcb::main_target_of(at, tcb::kBlock, absmax, true);
}

// VARIANT 0, 1, 2: TCFP-8, -12, -16; NF: TCFP-8's NormalFloat-aware scale. `blocks` blocks of 32.
template <class T, int VARIANT, bool NF>
__global__ void __launch_bounds__(256) tcfp_lean_kernel(const T* __restrict__ x, int64_t blocks,
                                                        tcb::BlockParams bp, Scratch* s, Outs o) {
  static_assert(!NF || VARIANT == 0, "only TCFP-8 chooses its scale from the statistics");
  using R = Raw<T>;
  constexpr int V = R::V;
  constexpr int L = tcb::kBlock / V;
  constexpr int U = kLeanRounds;
  constexpr scalar::Format fp8 = static_format(kE4M3FN);
  const scalar::Format e8m0 = bp.e8m0, res = bp.residual;
  const uint32_t nanc = (1u << e8m0.bits) - 1;
  const int lane = threadIdx.x & 31;
  const int64_t total = blocks * L;
  unsigned clipped = 0, nonfinite = 0;
  // Blocks never straddle the end (L divides 32 and the count of chunks), so the lanes past it
  // hold whole blocks of zeros: they take part in the shuffles and store nothing.
  lean_rounds<U>(x, total, [&](const uint32_t(&chunk)[1][4], int64_t c) {
    const uint32_t(&raw)[4] = chunk[0];
    const bool live = c < total;
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = R::value(raw, k);
    const uint32_t lane_bits = R::absmax_bits(raw);
    const uint32_t bits = tile_max_bits<L>(lane_bits);
    const float a = __uint_as_float(bits);
    const bool nan_block = bits >= 0x7F800000u;  // a NaN or Inf: the block is NaN
    uint32_t sc;
    if constexpr (NF) {
      const float mean = block_sum<V, L>(v) * 0.03125f;
      float d2[V];
#pragma unroll
      for (int k = 0; k < V; ++k) d2[k] = (v[k] - mean) * (v[k] - mean);
      const float ss = block_sum<V, L>(d2);
      sc = nan_block              ? nanc
           : bits < kNfFloatLimit ? nf_scale_bounded(ss, a, fp8, e8m0)
                                  : kScaleOpen;
      if (__any_sync(0xffffffffu, sc == kScaleOpen)) {
        const double t = nf_target_exact<V, L>(v, a);
        if (sc == kScaleOpen) sc = tcb::block_scale_code(t, fp8, e8m0);
      }
    } else {
      sc = nan_block ? nanc : block_scale_code_f32(a, fp8, e8m0);
    }
    // sc <= 247 for a finite block (float's absmax is below 1.75 * 2^128), so 2^-shift is a
    // normal float and one multiplication scales exactly (products below 2^-126 code as zero).
    const int sh = static_cast<int>(sc) - e8m0.bias;
    const float f1 = pow2f(-sh);
    uint32_t cw[V / 4];
    if (nan_block) {
#pragma unroll
      for (int k = 0; k < V; ++k) nonfinite += (__float_as_uint(v[k]) & 0x7FFFFFFFu) >= 0x7F800000u;
#pragma unroll
      for (int q = 0; q < V / 4; ++q) cw[q] = 0;
    } else {
#pragma unroll
      for (int q = 0; q < V / 4; ++q)
        cw[q] = fp8x4<__NV_E4M3>(v[4 * q] * f1, v[4 * q + 1] * f1, v[4 * q + 2] * f1,
                                 v[4 * q + 3] * f1);
      // code_e4m3fn's clip test, monotone in the magnitude: only a lane whose largest value
      // clips has clipped values.
      if (__uint_as_float(lane_bits) * f1 > 464.0f) {
#pragma unroll
        for (int k = 0; k < V; ++k) clipped += fabsf(v[k] * f1) > 464.0f ? 1 : 0;
      }
    }
    uint32_t rw[V / 4], rsc = nanc;
    if constexpr (VARIANT != 0) {
      // The residual x - q * 2^shift: at most x's 24 significant bits (q's quantum is coarser
      // than x's last place and the residual is no larger than x), so a float. q * 2^shift is
      // a float too while 2^shift is a normal float and q * 2^shift below 2^128.
      float r[V];
      const bool float_path = sh >= -126 && sh <= 119;
      const float fy = pow2f(float_path ? sh : 0);
#pragma unroll
      for (int q = 0; q < V / 2; ++q) {
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(
            static_cast<__nv_fp8x2_storage_t>(cw[q / 2] >> (16 * (q % 2))), __NV_E4M3);
        const float2 m = __half22float2(__half2(hr));
        if (float_path) {
          r[2 * q] = v[2 * q] - m.x * fy;
          r[2 * q + 1] = v[2 * q + 1] - m.y * fy;
        } else {
          r[2 * q] = static_cast<float>(static_cast<double>(v[2 * q]) -
                                        static_cast<double>(m.x) * scalar::pow2(sh));
          r[2 * q + 1] = static_cast<float>(static_cast<double>(v[2 * q + 1]) -
                                            static_cast<double>(m.y) * scalar::pow2(sh));
        }
      }
      uint32_t rbits = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) rbits = max(rbits, __float_as_uint(r[k]) & 0x7FFFFFFFu);
      rbits = tile_max_bits<L>(rbits);
      if (!nan_block) rsc = block_scale_code_f32(__uint_as_float(rbits), res, e8m0);
      // The residual's scale code is at most 247 too, so 2^-rshift is a normal float.
      const float g = pow2f(e8m0.bias - static_cast<int>(nan_block ? 0u : rsc));
      if (nan_block) {
#pragma unroll
        for (int q = 0; q < V / 4; ++q) rw[q] = 0;
      } else if constexpr (VARIANT == 2) {
#pragma unroll
        for (int q = 0; q < V / 4; ++q)
          rw[q] =
              fp8x4<__NV_E4M3>(r[4 * q] * g, r[4 * q + 1] * g, r[4 * q + 2] * g, r[4 * q + 3] * g);
      } else {
        // TCFP-12's int4 residual, one byte each as store_code writes a signed code.
        const float inv_q = pow2f(-res.qmin), maxr = static_cast<float>(res.maxr);
#pragma unroll
        for (int q = 0; q < V / 4; ++q)
          rw[q] = int_fixed_byte(r[4 * q] * g, inv_q, maxr) |
                  int_fixed_byte(r[4 * q + 1] * g, inv_q, maxr) << 8 |
                  int_fixed_byte(r[4 * q + 2] * g, inv_q, maxr) << 16 |
                  int_fixed_byte(r[4 * q + 3] * g, inv_q, maxr) << 24;
      }
    }
    if (!live) return;
    const int64_t e0 = c * V;
    if constexpr (V == 8) {
      *reinterpret_cast<uint2*>(static_cast<uint8_t*>(o.codes) + e0) =
          make_uint2(cw[0], cw[1 % (V / 4)]);
      if constexpr (VARIANT != 0)
        *reinterpret_cast<uint2*>(static_cast<uint8_t*>(o.residual) + e0) =
            make_uint2(rw[0], rw[1 % (V / 4)]);
    } else {
      *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(o.codes) + e0) = cw[0];
      if constexpr (VARIANT != 0)
        *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(o.residual) + e0) = rw[0];
    }
    if (lane % L == 0) {
      static_cast<uint8_t*>(o.scale)[c / L] = static_cast<uint8_t>(sc);
      if constexpr (VARIANT != 0) o.rscale[c / L] = static_cast<uint8_t>(rsc);
    }
  });
  add_counts(s, clipped, nonfinite, 0);
}

}  // namespace castscope::gpu::detail
