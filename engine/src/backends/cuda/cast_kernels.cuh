// The cast kernels. Every element goes through the shared CS_HD functions of group.hpp /
// scalar.hpp / tcfp_block.hpp with the same arguments the CPU engine passes (element index for
// the stochastic-rounding counter, group statistics in the same order-independent form), so the
// bits are the CPU's by construction; the kernels only decide who computes what.
#pragma once

#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/fast_quant.cuh"
#include "core/group.hpp"
#include "families/tcfp/tcfp_block.hpp"

namespace castscope::gpu::detail {

using castscope::detail::GroupScale;
using castscope::detail::KernelParams;
namespace tcb = castscope::detail::tcfp;

// Group geometry of a plan (the tensor viewed as [B, R, C] with tiles of tr x tc).
struct Geo {
  int64_t B, R, C, tr, tc, gr, gc;
  int sub, sparse_dim, sp_n, sp_m;
};

// Output pointers (null when not produced) and their storage widths in bytes.
struct Outs {
  float* values = nullptr;
  void* codes = nullptr;
  int code_size = 1;
  bool pack4 = false;  // codes packed two per byte along the last axis (compress layout)
  uint8_t* mask = nullptr;
  void* scale = nullptr;
  int scale_size = 1;
  void* zero = nullptr;
  int zero_size = 1;
  uint8_t* meta = nullptr;
  void* residual = nullptr;  // TCFP second term
  int residual_size = 1;
  uint8_t* rscale = nullptr;
};

// Device-side scalars of one cast: tensor-wide statistics, the tensor scale (multiscale), the
// scale of a tensor-scoped datatype, and the counts.
struct Scratch {
  unsigned long long absmax_bits, lo_key, hi_key;
  unsigned int nonfinite;
  double tensor_scale;
  GroupScale gs;
  unsigned long long counts[3];  // clipped, nonfinite, pruned
};

using castscope::detail::GroupStats;

// Folds the statistics of the lanes in `mask` into every one of them.
__device__ __forceinline__ void warp_reduce(GroupStats& st, unsigned mask = 0xffffffffu) {
  for (int m = 16; m > 0; m >>= 1) {
    GroupStats o;
    o.absmax = __shfl_xor_sync(mask, st.absmax, m);
    o.lo = __shfl_xor_sync(mask, st.lo, m);
    o.hi = __shfl_xor_sync(mask, st.hi, m);
    o.nonfinite = __shfl_xor_sync(mask, static_cast<int>(st.nonfinite), m) != 0;
    st.merge(o);
  }
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Adds per-thread counts into the cast's totals (one atomic per warp).
__device__ __forceinline__ void add_counts(Scratch* s, unsigned long long clipped,
                                           unsigned long long nonfinite,
                                           unsigned long long pruned) {
  clipped = warp_sum(clipped);
  nonfinite = warp_sum(nonfinite);
  pruned = warp_sum(pruned);
  if ((threadIdx.x & 31) == 0) {
    if (clipped) atomicAdd(&s->counts[0], clipped);
    if (nonfinite) atomicAdd(&s->counts[1], nonfinite);
    if (pruned) atomicAdd(&s->counts[2], pruned);
  }
}

// N:M sparsity: whether element (i, j) of a group is kept. The CPU picks, in each run of M, the N
// largest magnitudes (NaN / Inf count as largest, ties to the lower index); that is exactly the
// elements with fewer than N run-mates ahead of them in the order (magnitude desc, index asc).
template <class T>
__device__ __forceinline__ bool is_kept(const T* x, const Geo& g, int64_t base, int64_t r0,
                                        int64_t r1, int64_t c0, int64_t c1, int64_t i, int64_t j) {
  if (g.sparse_dim < 0) return true;
  auto mag = [&](int64_t ii, int64_t jj) {
    const double a = fabs(Load<T>::get(x, base + ii * g.C + jj));
    return a != a ? scalar::bits_double(0x7FF0000000000000ull) : a;
  };
  const double mq = mag(i, j);
  int ahead = 0;
  if (g.sparse_dim == 1) {
    const int64_t js = c0 + ((j - c0) / g.sp_m) * g.sp_m;
    const int64_t je = js + g.sp_m < c1 ? js + g.sp_m : c1;
    for (int64_t q = js; q < je; ++q) {
      if (q == j) continue;
      const double a = mag(i, q);
      ahead += (a > mq || (a == mq && q < j)) ? 1 : 0;
    }
  } else {
    const int64_t is = r0 + ((i - r0) / g.sp_m) * g.sp_m;
    const int64_t ie = is + g.sp_m < r1 ? is + g.sp_m : r1;
    for (int64_t q = is; q < ie; ++q) {
      if (q == i) continue;
      const double a = mag(q, j);
      ahead += (a > mq || (a == mq && q < i)) ? 1 : 0;
    }
  }
  return ahead < g.sp_n;
}

// The header's kernels that are not templates have internal linkage, so that test code can include
// the header beside the cast backend (tests/gpu/verify) without a second definition.
static __global__ void init_scratch(Scratch* s) {
  s->absmax_bits = 0;
  s->lo_key = s->hi_key = order_key(0.0);
  s->nonfinite = 0;
  s->tensor_scale = 1.0;
  s->gs = GroupScale{};
  s->counts[0] = s->counts[1] = s->counts[2] = 0;
}

// Block reduction of per-thread statistics, then one atomic per block into the cast's totals.
__device__ __forceinline__ void commit_stats(GroupStats st, Scratch* s) {
  warp_reduce(st);
  __shared__ double part_am[8], part_lo[8], part_hi[8];
  __shared__ int part_nf[8];
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    part_am[w] = st.absmax;
    part_lo[w] = st.lo;
    part_hi[w] = st.hi;
    part_nf[w] = st.nonfinite ? 1 : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    GroupStats t;
    for (int k = 0; k < static_cast<int>(blockDim.x >> 5); ++k) {
      GroupStats o;
      o.absmax = part_am[k];
      o.lo = part_lo[k];
      o.hi = part_hi[k];
      o.nonfinite = part_nf[k] != 0;
      t.merge(o);
    }
    atomicMax(&s->absmax_bits, static_cast<unsigned long long>(__double_as_longlong(t.absmax)));
    atomicMin(&s->lo_key, order_key(t.lo));
    atomicMax(&s->hi_key, order_key(t.hi));
    if (t.nonfinite) atomicOr(&s->nonfinite, 1u);
  }
}

// Tensor-wide statistics (for tensor scales): block reduction, then one atomic per block.
template <class T>
__global__ void __launch_bounds__(256)
    reduce_kernel(const T* __restrict__ x, int64_t n, Scratch* s) {
  GroupStats st;
  if constexpr (sizeof(T) <= 4) {
    // Float inputs: the statistics are exact in float (a -0 lo is cleared by choose_scale's clamp).
    float am = 0.0f, lo = 0.0f, hi = 0.0f;
    bool nf = false;
    for (int64_t i = grid_start(); i < n; i += grid_stride()) {
      const float v = static_cast<float>(Load<T>::get(x, i));
      if (!(v - v == 0.0f)) {
        nf = true;
        continue;
      }
      am = fmaxf(am, fabsf(v));
      lo = fminf(lo, v);
      hi = fmaxf(hi, v);
    }
    st.absmax = am;
    st.lo = lo;
    st.hi = hi;
    st.nonfinite = nf;
  } else {
    for (int64_t i = grid_start(); i < n; i += grid_stride()) st.add(Load<T>::get(x, i));
  }
  commit_stats(st, s);
}

// The CPU's tensor-scale and tensor-scoped scale choice, on one device thread so that no host
// round trip sits between the reduction and the cast.
static __global__ void finalize_kernel(KernelParams kp, double tile_scale_max, bool multiscale,
                                       bool tensor_scope, Scratch* s, Outs o, void* tenscale,
                                       int second_size) {
  const double absmax = scalar::bits_double(s->absmax_bits);
  const double lo = from_order_key(s->lo_key), hi = from_order_key(s->hi_key);
  const bool nonfinite = s->nonfinite != 0;
  if (multiscale) {
    GroupStats st;
    st.absmax = absmax;
    st.nonfinite = nonfinite;
    const castscope::detail::TensorScale ts =
        castscope::detail::choose_tensor_scale(kp, st, tile_scale_max);
    s->tensor_scale = ts.t;
    kp.tensor_scale = ts.t;
    if (tenscale) store_code(tenscale, second_size, 0, ts.code, kp.second);
  }
  if (tensor_scope) {
    GroupScale gs = castscope::detail::choose_scale(kp, absmax, lo, hi, nonfinite);
    s->gs = gs;
    if (o.scale) store_code(o.scale, o.scale_size, 0, gs.scale_code, kp.scale);
    if (o.zero) store_code(o.zero, o.zero_size, 0, gs.zero_code, kp.second);
  }
}

// The host rounds a NaN double to the float 0x7FC00000; the device's conversion gives 0x7FFFFFFF.
// Every NaN the shared decoders produce is that one positive quiet NaN, so map it back.
__device__ __forceinline__ float canon_nan(float f) {
  return f != f ? __uint_as_float(0x7FC00000u) : f;
}

// One element as the CPU's Engine::elements / Engine::group write it.
__device__ __forceinline__ uint32_t element_out(const KernelParams& kp, const GroupScale& gs,
                                                double v, int adj, int64_t e, const Outs& o,
                                                unsigned long long& clipped) {
  scalar::Quantized q = castscope::detail::encode_element(kp, gs, v, adj, static_cast<uint64_t>(e));
  clipped += q.clipped ? 1 : 0;
  if (o.values) o.values[e] = canon_nan(castscope::detail::decode_element(kp, gs, q, adj));
  return scalar::encode(q, kp.data);
}

// scalar::Quantized of a scaled element (encode_element's scaled, saturating branch) through the
// fast round-to-nearest-even quantizer. f32: the scale is a power of two (exponent scale, no tensor
// scale), so x * 2^-shift is formed in float (two factors, each a normal power of two).
// d: what scaled_input divides by (2^shift * t, or s, or s * t; exact in double), inv = RN(1 / d).
template <bool F32>
__device__ __forceinline__ scalar::Quantized fast_scaled(const KernelParams& kp,
                                                         const GroupScale& gs, float x, double d,
                                                         double inv) {
  if (!(x - x == 0.0f) || gs.nan) return scalar::Quantized{};
  if (gs.s == 0.0) {  // a zero scale rounds to zero, keeping the sign as encode_element does
    scalar::Quantized z;
    z.neg = (__float_as_uint(x) >> 31) != 0;
    return castscope::detail::canonical(z, kp.data_codes);
  }
  if (F32) {
    const int h1 = -gs.shift / 2, h2 = -gs.shift - h1;
    return castscope::detail::canonical(quantize_rne_f32(x * pow2f(h1) * pow2f(h2), kp.data),
                                        kp.data_codes);
  }
  return castscope::detail::canonical(quantize_rne_div(static_cast<double>(x), d, inv, kp.data),
                                      kp.data_codes);
}

// The divisor of scaled_input for a scaled group without zero point.
__device__ __forceinline__ double scale_divisor(const KernelParams& kp, const GroupScale& gs) {
  if (kp.scale_is_exponent) return scalar::pow2(gs.shift) * (kp.multiscale ? gs.t : 1.0);
  return kp.multiscale ? gs.s * gs.t : gs.s;
}

// Unscaled and tensor-scoped casts: chunks of 8 elements per thread (vector loads for float32
// and bfloat16, codes stored 8 / packed 4 bytes at once).
template <class T, int F>
__global__ void __launch_bounds__(256)
    elementwise_kernel(const T* __restrict__ x, int64_t n, KernelParams kp, Scratch* s, Outs o,
                       bool fast) {
  if constexpr (F != kRuntime) kp.data = kp.data_codes = static_format(F);
  if (kp.multiscale) kp.tensor_scale = s->tensor_scale;
  // Fast rounding: float inputs, no scale, round to nearest even, saturation, codes only.
  const bool fastq = fast && sizeof(T) <= 4 && !kp.scaled && !o.values;
  const GroupScale gs = kp.scaled ? s->gs : GroupScale{};
  unsigned long long clipped = 0, nonfinite = 0;
  const int64_t chunks = (n + 7) / 8;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += stride) {
    const int64_t e0 = c * 8;
    const int cnt = n - e0 < 8 ? static_cast<int>(n - e0) : 8;
    double v[8];
    if (cnt == 8 && sizeof(T) == 4) {
      const float4* p = reinterpret_cast<const float4*>(x + e0);
      const float4 a = p[0], b = p[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
      v[7] = b.w;
    } else if (cnt == 8 && sizeof(T) == 2) {
      const uint4 a = *reinterpret_cast<const uint4*>(x + e0);
      const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned short lo = static_cast<unsigned short>(w[k] & 0xFFFF),
                             hi = static_cast<unsigned short>(w[k] >> 16);
        if constexpr (std::is_same<T, __half>::value) {
          v[2 * k] = __half2float(__ushort_as_half(lo));
          v[2 * k + 1] = __half2float(__ushort_as_half(hi));
        } else {
          v[2 * k] = __bfloat162float(__ushort_as_bfloat16(lo));
          v[2 * k + 1] = __bfloat162float(__ushort_as_bfloat16(hi));
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = k < cnt ? Load<T>::get(x, e0 + k) : 0.0;
    }
    uint32_t code[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k >= cnt) {
        code[k] = 0;
        continue;
      }
      nonfinite += (v[k] - v[k] == 0) ? 0 : 1;
      if (fastq && v[k] - v[k] == 0 && F == kE4M3FN) {  // finite, unscaled: round the input itself
        bool cl = false;
        code[k] = code_e4m3fn(static_cast<float>(v[k]), cl);
        clipped += cl ? 1 : 0;
      } else if (fastq && v[k] - v[k] == 0) {
        const scalar::Quantized q = castscope::detail::canonical(
            quantize_rne_f32(static_cast<float>(v[k]), kp.data), kp.data_codes);
        clipped += q.clipped ? 1 : 0;
        code[k] = scalar::encode(q, kp.data);
      } else {
        code[k] = element_out(kp, gs, v[k], 0, e0 + k, o, clipped);
      }
    }
    if (!o.codes) continue;
    if (o.pack4) {
      uint8_t* dst = static_cast<uint8_t*>(o.codes) + e0 / 2;
      if (cnt == 8) {
        uint32_t w = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) w |= (code[k] & 0xFu) << (4 * k);
        *reinterpret_cast<uint32_t*>(dst) = w;
      } else {
        for (int k = 0; k < cnt; k += 2)
          dst[k / 2] =
              static_cast<uint8_t>((code[k] & 0xF) | ((k + 1 < cnt ? code[k + 1] & 0xF : 0) << 4));
      }
    } else if (cnt == 8 && o.code_size == 1 && kp.data.kind != scalar::Kind::Int) {
      uint2 w;
      w.x = (code[0] & 0xFF) | (code[1] & 0xFF) << 8 | (code[2] & 0xFF) << 16 |
            (code[3] & 0xFF) << 24;
      w.y = (code[4] & 0xFF) | (code[5] & 0xFF) << 8 | (code[6] & 0xFF) << 16 |
            (code[7] & 0xFF) << 24;
      *reinterpret_cast<uint2*>(static_cast<uint8_t*>(o.codes) + e0) = w;
    } else {
      for (int k = 0; k < cnt; ++k) store_code(o.codes, o.code_size, e0 + k, code[k], kp.data);
    }
  }
  add_counts(s, clipped, nonfinite, 0);
}

// General tile-scaled casts (any tile shape, channels, 2-D tiles, subtiles, N:M sparsity, zero
// points): one warp per group; lanes stride over the group's elements, so rows of a tile are read
// coalesced.
template <class T>
__global__ void __launch_bounds__(256)
    group_kernel(const T* __restrict__ x, KernelParams kp, Geo g, Scratch* s, Outs o) {
  if (kp.multiscale) kp.tensor_scale = s->tensor_scale;
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t nwarps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int64_t per = g.gr * g.gc, groups = g.B * per;
  unsigned long long clipped = 0, nonfinite = 0, pruned = 0;
  for (int64_t grp = warp; grp < groups; grp += nwarps) {
    const int64_t b = grp / per, gi = (grp % per) / g.gc, gj = grp % g.gc;
    const int64_t r0 = gi * g.tr, r1 = r0 + g.tr < g.R ? r0 + g.tr : g.R;
    const int64_t c0 = gj * g.tc, c1 = c0 + g.tc < g.C ? c0 + g.tc : g.C;
    const int64_t base = b * g.R * g.C, w = c1 - c0, cnt = (r1 - r0) * w;
    GroupStats st;
    for (int64_t k = lane; k < cnt; k += 32) {
      const int64_t i = r0 + k / w, j = c0 + k % w;
      if (is_kept(x, g, base, r0, r1, c0, c1, i, j))
        st.add(Load<T>::get(x, base + i * g.C + j));
      else
        ++pruned;
    }
    warp_reduce(st);
    const GroupScale gs =
        castscope::detail::choose_scale(kp, st.absmax, st.lo, st.hi, st.nonfinite);
    if (lane == 0) {
      if (o.scale) store_code(o.scale, o.scale_size, grp, gs.scale_code, kp.scale);
      if (o.zero) store_code(o.zero, o.zero_size, grp, gs.zero_code, kp.second);
    }
    const int64_t step = g.sub ? g.sub : w;
    const int64_t units_per_row = (w + step - 1) / step;
    const int64_t units = (r1 - r0) * units_per_row;
    const int64_t subs = g.sub ? g.tc / g.sub : 0;
    for (int64_t u = lane; u < (g.sub ? units : cnt); u += 32) {
      int64_t i, j0, j1;
      if (g.sub) {
        i = r0 + u / units_per_row;
        j0 = c0 + (u % units_per_row) * step;
        j1 = j0 + step < c1 ? j0 + step : c1;
      } else {
        i = r0 + u / w;
        j0 = c0 + u % w;
        j1 = j0 + 1;
      }
      int adj = 0;
      if (g.sub) {
        if (!gs.nan) {
          double a = 0;
          for (int64_t j = j0; j < j1; ++j)
            if (is_kept(x, g, base, r0, r1, c0, c1, i, j)) {
              const double m = fabs(Load<T>::get(x, base + i * g.C + j));
              a = m > a ? m : a;
            }
          adj = castscope::detail::subtile_offset(kp, gs, a);
        }
        if (o.meta) o.meta[grp * subs + (j0 - c0) / g.sub] = static_cast<uint8_t>(adj);
      }
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t e = base + i * g.C + j;
        const double v = Load<T>::get(x, e);
        nonfinite += (v - v == 0) ? 0 : 1;
        const bool kept = is_kept(x, g, base, r0, r1, c0, c1, i, j);
        if (o.mask) o.mask[e] = kept ? 1 : 0;
        uint32_t code = 0;
        if (kept) {
          code = element_out(kp, gs, v, adj, e, o, clipped);
        } else if (o.values) {
          o.values[e] = 0.0f;
        }
        if (o.codes) store_code(o.codes, o.code_size, e, code, kp.data);
      }
    }
  }
  add_counts(s, clipped, nonfinite, pruned);
}

// 16-byte vector of V input elements as floats (float32: 4, bfloat16: 8).
template <class T>
struct Vec;
template <>
struct Vec<float> {
  static constexpr int V = 4;
  __device__ __forceinline__ static void load(const float* p, float (&v)[4]) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  }
};
template <>
struct Vec<__nv_bfloat16> {
  static constexpr int V = 8;
  __device__ __forceinline__ static void load(const __nv_bfloat16* p, float (&v)[8]) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = __uint_as_float(w[k] << 16);
      v[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
    }
  }
};

// reduce_kernel for float32 / bfloat16 inputs whose size is a multiple of a 16-byte vector: two
// vector loads in flight per thread, so the pass runs at copy speed.
template <class T>
__global__ void __launch_bounds__(256)
    reduce_vec_kernel(const T* __restrict__ x, int64_t chunks, Scratch* s) {
  constexpr int V = Vec<T>::V;
  float am = 0.0f, lo = 0.0f, hi = 0.0f;
  bool nf = false;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += 2 * stride) {
    float v[2][V];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (c + u * stride < chunks)
        Vec<T>::load(x + (c + u * stride) * V, v[u]);
      else
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float e = v[u][k];
        if (!(e - e == 0.0f)) {
          nf = true;
          continue;
        }
        am = fmaxf(am, fabsf(e));
        lo = fminf(lo, e);
        hi = fmaxf(hi, e);
      }
  }
  GroupStats st;
  st.absmax = am;
  st.lo = lo;
  st.hi = hi;
  st.nonfinite = nf;
  commit_stats(st, s);
}

// Unscaled casts of float32 / bfloat16 input with fast rounding (round to nearest even,
// saturation, codes only; float codes of one or two bytes or packed 4-bit codes; numel a
// multiple of the vector) to a grid without a compile-time copy (those take lean_kernel): U
// 16-byte loads in flight per thread and float arithmetic throughout. elementwise_kernel held one
// load per thread and widened every element to double, which left it issue-bound at half the
// copy bandwidth. Non-finite inputs (rare) take the shared element_out.
template <class T>
__global__ void __launch_bounds__(256) unscaled_vec_kernel(const T* __restrict__ x, int64_t chunks,
                                                           KernelParams kp, Scratch* s, Outs o) {
  constexpr int V = Vec<T>::V;
  constexpr int U = 4;
  const GroupScale gs{};
  unsigned clipped = 0, nonfinite = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < chunks;
       c0 += U * stride) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c0 + u * stride < chunks) Vec<T>::load(x + (c0 + u * stride) * V, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * stride;
      if (c >= chunks) break;
      uint32_t code[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xv = v[u][k];
        bool cl = false;
        if (!(xv - xv == 0.0f)) {
          ++nonfinite;
          unsigned long long c2 = 0;
          code[k] = element_out(kp, gs, xv, 0, c * V + k, o, c2);
          clipped += static_cast<unsigned>(c2);
          continue;
        }
        const scalar::Quantized q =
            castscope::detail::canonical(quantize_rne_f32(xv, kp.data), kp.data_codes);
        cl = q.clipped;
        code[k] = scalar::encode(q, kp.data);
        clipped += cl ? 1 : 0;
      }
      if (o.code_size == 2) {  // 16-bit floats (bfloat16, float16)
        uint32_t w[V / 2];
#pragma unroll
        for (int q = 0; q < V / 2; ++q) w[q] = (code[2 * q] & 0xFFFFu) | code[2 * q + 1] << 16;
        uint16_t* dst = static_cast<uint16_t*>(o.codes) + c * V;
        if (V == 4)
          *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1 % (V / 2)]);
        else
          *reinterpret_cast<uint4*>(dst) =
              make_uint4(w[0], w[1 % (V / 2)], w[2 % (V / 2)], w[3 % (V / 2)]);
      } else if (o.pack4) {
        uint32_t w = 0;
#pragma unroll
        for (int k = 0; k < V; ++k) w |= (code[k] & 0xFu) << (4 * k);
        uint8_t* dst = static_cast<uint8_t*>(o.codes) + c * V / 2;
        if (V == 4)
          *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(w);
        else
          *reinterpret_cast<uint32_t*>(dst) = w;
      } else {
        uint32_t w[V / 4];
#pragma unroll
        for (int q = 0; q < V / 4; ++q)
          w[q] = (code[4 * q] & 0xFF) | (code[4 * q + 1] & 0xFF) << 8 |
                 (code[4 * q + 2] & 0xFF) << 16 | (code[4 * q + 3] & 0xFF) << 24;
        uint8_t* dst = static_cast<uint8_t*>(o.codes) + c * V;
        if (V == 4)
          *reinterpret_cast<uint32_t*>(dst) = w[0];
        else
          *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[V / 4 - 1]);
      }
    }
  }
  add_counts(s, clipped, nonfinite, 0);
}

// NVFP4's float path applies: the tensor scale t a positive float and RN(1 / (t * data_max))
// normal in float.
__device__ __forceinline__ bool nvfp4_fits(double t, double inv_td) {
  const float tf = static_cast<float>(t);
  return static_cast<double>(tf) == t && tf > 0.0f && inv_td > 0x1p-100 && inv_td < 0x1p100;
}

// Fast path: 1-D tiles of TILE along a contiguous last axis, float32 / bfloat16 input, one-byte
// codes and scales, no zero point, subtile or sparsity. L = TILE / V lanes share a tile; each
// lane loads 16 bytes, the tile's absmax is combined with shuffles, and codes go out as one
// 4- or 8-byte store per lane (two codes per byte when packed).
// MODE 0: the shared encode_element (any rounding, values too); 1: fast rounding with a
// power-of-two scale formed in float, the scale chosen from the absmax's float bits, for grids
// without a code function (lean_kernel takes the others); 2: fast
// rounding of the double scaled input (float or tensor scales); 3: NVFP4 (e2m1 data, e4m3 scale,
// float tensor scale): scale chosen in float, codes from thresholds (exact without a quotient).
// MODE 3 is held to 64 registers (4 blocks per SM; unbounded it takes 80 and reaches 35%
// occupancy): measured 8% faster from float32, 2% slower from bfloat16.
// leave_nv: the casts NVFP4's float path applies to are lean_kernel's; this launch does the rest.
template <class T, int TILE, int MODE, int F>
__global__ void __launch_bounds__(256, MODE == 3 ? 4 : 1)
    fast_kernel(const T* __restrict__ x, int64_t ntiles, KernelParams kp, Scratch* s, Outs o,
                bool fast_scale, bool leave_nv = false) {
  if constexpr (F != kRuntime) kp.data = kp.data_codes = static_format(F);
  constexpr int V = Vec<T>::V;
  constexpr int L = TILE / V;
  constexpr int U = 2;  // rounds per iteration: two 16-byte loads in flight per thread
  static_assert(L >= 1 && L <= 32 && (32 % L) == 0, "lanes per tile must divide a warp");
  if (kp.multiscale) kp.tensor_scale = s->tensor_scale;
  const double inv_td =
      MODE >= 2 && fast_scale ? 1.0 / ((kp.multiscale ? kp.tensor_scale : 1.0) * kp.data_max) : 0.0;
  // MODE 3 needs the tensor scale as a positive float and RN(1 / (t * data_max)) normal in float;
  // otherwise (a NaN or extreme tensor scale) it runs as MODE 2.
  const float tf = static_cast<float>(kp.tensor_scale);
  const bool nv = MODE == 3 && fast_scale && nvfp4_fits(kp.tensor_scale, inv_td);
  if (leave_nv && nv) return;  // lean_kernel cast it
  const float inv_tf = static_cast<float>(inv_td);
  const int lane = threadIdx.x & 31;
  const int part = lane % L;
  const int64_t total = ntiles * L;  // 16-byte chunks
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned clipped = 0, nonfinite = 0;
  for (int64_t base = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) - lane;
       base < total; base += U * stride) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * stride + lane;
      if (c < total)
        Vec<T>::load(x + c * V, v[u]);
      else
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * stride + lane;
      float am = 0.0f;
      int nf = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (v[u][k] - v[u][k] == 0.0f)
          am = fmaxf(am, fabsf(v[u][k]));
        else
          nf = 1;
      }
#pragma unroll
      for (int m = 1; m < L; m <<= 1) {
        am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, m));
        nf |= __shfl_xor_sync(0xffffffffu, nf, m);
      }
      if (c >= total) continue;
      GroupScale gs;
      if (MODE == 1)
        gs = choose_exp_scale_f32(kp, am, nf != 0);
      else if (MODE == 3 && nv)
        gs = choose_e4m3_scale_f32(kp, am, nf != 0, inv_tf, [&] {
          return choose_float_scale_fast(kp, am, nf != 0, inv_td);
        });
      else if (MODE >= 2 && fast_scale)
        gs = choose_float_scale_fast(kp, am, nf != 0, inv_td);
      else
        gs = castscope::detail::choose_scale(kp, am, 0.0, 0.0, nf != 0);
      const int64_t e0 = c * V;
      const bool zero_group = gs.nan || gs.s == 0.0;
      double d = 1.0, inv = 1.0;
      E2m1Thresholds thr{};
      if (MODE == 3 && nv) {
        thr = e2m1_thresholds(static_cast<float>(gs.s), tf);
      } else if (MODE >= 2 && !zero_group) {
        d = scale_divisor(kp, gs);
        inv = 1.0 / d;
      }
      const float inv_f = static_cast<float>(inv);
      // The float ladder needs 1 / d comfortably inside float's normal range.
      const bool ladder = MODE >= 2 && F == kE2M1FNUZ && d > 0x1p-100 && d < 0x1p100;
      uint32_t code[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xv = v[u][k];
        const bool fin = xv - xv == 0.0f;
        nonfinite += fin ? 0 : 1;
        if (MODE == 0) {
          unsigned long long cl = 0;
          code[k] = element_out(kp, gs, xv, 0, e0 + k, o, cl);
          clipped += static_cast<unsigned>(cl);
        } else if (MODE == 3 && nv) {
          bool cl = false;
          code[k] = !fin         ? 0u
                    : zero_group ? code_e2m1_zero_scale(xv, gs.nan)
                                 : code_e2m1fnuz_thr(xv, thr, cl);
          clipped += (fin && !zero_group && cl) ? 1 : 0;
        } else if (MODE >= 2 && F == kE2M1FNUZ && ladder) {
          bool cl = false;
          code[k] = !fin         ? 0u
                    : zero_group ? code_e2m1_zero_scale(xv, gs.nan)
                                 : code_e2m1fnuz_div(xv, d, inv_f, kp.data, cl);
          clipped += (fin && !zero_group && cl) ? 1 : 0;
        } else {
          const scalar::Quantized q = fast_scaled<MODE == 1>(kp, gs, xv, d, inv);
          clipped += q.clipped ? 1 : 0;
          code[k] = scalar::encode(q, kp.data);
        }
      }
      if (part == 0 && o.scale) store_code(o.scale, 1, c / L, gs.scale_code, kp.scale);
      if (o.codes) {
        if (o.pack4) {
          uint32_t w = 0;
#pragma unroll
          for (int k = 0; k < V; ++k) w |= (code[k] & 0xFu) << (4 * k);
          uint8_t* dst = static_cast<uint8_t*>(o.codes) + e0 / 2;
          if (V == 4)
            *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(w);
          else
            *reinterpret_cast<uint32_t*>(dst) = w;
        } else {
          if (kp.data.kind == scalar::Kind::Int &&
              kp.data.bits < 8)  // sign-extend, as store_code does
#pragma unroll
            for (int k = 0; k < V; ++k)
              if ((code[k] >> (kp.data.bits - 1)) & 1u) code[k] |= ~((1u << kp.data.bits) - 1);
          uint32_t w[V / 4];
#pragma unroll
          for (int q = 0; q < V / 4; ++q)
            w[q] = (code[4 * q] & 0xFF) | (code[4 * q + 1] & 0xFF) << 8 |
                   (code[4 * q + 2] & 0xFF) << 16 | (code[4 * q + 3] & 0xFF) << 24;
          uint8_t* dst = static_cast<uint8_t*>(o.codes) + e0;
          if (V == 4)
            *reinterpret_cast<uint32_t*>(dst) = w[0];
          else
            *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[V / 4 - 1]);
        }
      }
    }
  }
  add_counts(s, clipped, nonfinite, 0);
}

}  // namespace castscope::gpu::detail
