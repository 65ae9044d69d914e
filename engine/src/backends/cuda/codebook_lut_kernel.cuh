// The codebook interval kernel (codebook_lut_kernel) and its helpers, for cast_codebook.cu, which
// launches it: shared-memory tables, staging, the float sums in the scale's units with their tie
// masks, and the double sums of encode_sub (codebook/cb_block.hpp) where the float bound cannot
// settle a choice.
#pragma once

#include <type_traits>

#include "families/codebook/cb_cast.hpp"
#include "families/codebook/cb_lut.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"
#include "backends/cuda/fast_quant.cuh"

namespace castscope::gpu::detail::codebook_kernel {

namespace cb = castscope::detail::cb;

struct CbGeo {
  int64_t C = 0, gc = 0, groups = 0, subs_per_row = 0;
};

struct CbOuts {
  uint8_t* codes = nullptr;
  float* values = nullptr;
  uint8_t* meta = nullptr;
  void* scale = nullptr;
  int scale_size = 1;
  unsigned long long* counts = nullptr;  // clipped, nonfinite
};

struct LutDev {
  const double* thr = nullptr;
  const uint8_t* bucket = nullptr;
  const uint8_t* slot = nullptr;
  const uint4* hi = nullptr;  // Lut::hi16 in 16-byte groups
  const uint16_t* same = nullptr;
  cb::LutIndex ix;
  int row_groups = 0;
};

// Each 16-byte group of the magnitude rows is stored kCopies times, copy c in bank group c: the
// eight threads of a quarter warp (one 16-byte shared load phase) read copies 0..7 and never
// conflict, whatever intervals their elements fall in.
constexpr int kCopies = 8;

// The scaled kernel's rows hold each magnitude as a whole float (no unpacking in the sums) in
// Q = max(W / 4, 1) 16-byte chunks, and each row 8 / Q times: a thread reads copy (tid / Q) % (8 /
// Q) and takes its chunks in the order rot, rot + 1, ... (rot = tid % Q), so that the eight threads
// of a quarter warp meet eight distinct bank groups (copy * Q + chunk) at every load. Its sums
// then sit in slots: slot 4t + j holds mapping 4 * ((rot + t) % Q) + j (slot_mapping). Row k
// starts at chunk 8k: 128 bytes per row, half the 16-bit rows' 256 for 16 mappings.
constexpr int kFloatRowBytes = 128;  // eight 16-byte chunks per row, whatever W
template <int W>
struct FloatRows {
  static constexpr int Q = W > 4 ? W / 4 : 1, copies = 8 / Q;
};

__device__ __forceinline__ int slot_mapping(int s, int rot, int q) {
  return 4 * ((rot + (s >> 2)) & (q - 1)) + (s & 3);
}

// The scaled kernel's code table, where every interval index fits in seven bits and subtiles hold
// whole 4-byte words of codes: the interval bytes carry the element's sign in bit 7, and entry
// 256 * m + byte is mapping m's code for that byte. Its rows start at a multiple of 256 (one row
// of slack), so that a byte's address is one byte permute of the interval word and the row's
// address / 256.
constexpr int kCodeTableBytes = 256;

// Set in a tile's first mapping choice (choices are below 16) when encode_subtiles wrote its codes.
constexpr uint8_t kDone = 0x80;

// Byte offsets of the interval kernel's shared memory: the tables, then one row per thread of
// staged input (tile + 1 elements, so that threads reading their own rows use distinct banks),
// code words and values.
struct Smem {
  int hi = 0, thr = 0, bucket = 0, slot = 0, same = 0, stage = 0, cstage = 0, vstage = 0, bests = 0;
  int codes = -1;  // the code table (kCodeTableBytes), or -1 where the kernel goes without it
  int total = 0;
  __host__ __device__ static int take(int& at, int bytes) {
    const int here = at;
    at += (bytes + 15) & ~15;
    return here;
  }
  // float_rows: the scaled kernel's layout (FloatRows), never larger than the 16-bit rows'.
  __host__ __device__ Smem(const LutDev& l, int width, int tile, int subs, int threads, int in_size,
                           bool values, bool float_rows, bool code_table = false) {
    int at = 0;
    if (code_table) codes = take(at, kCodeTableBytes * width + kCodeTableBytes);
    hi = take(at, (l.ix.nthr + 1) * (float_rows ? kFloatRowBytes : l.row_groups * kCopies * 16));
    thr = take(at, l.ix.nthr * 8);
    bucket = take(at, l.ix.buckets());
    slot = take(at, (l.ix.nthr + 1) * width);
    same = take(at, (l.ix.nthr + 1) * width * 2);
    stage = take(at, threads * (tile + 1) * in_size);
    cstage = take(at, threads * (tile / 4 + 1) * 4);
    vstage = take(at, values ? threads * (tile + 1) * 4 : 0);
    bests = take(at, threads * subs);
    total = at;
  }
};

template <class T>
using Staged = std::conditional_t<std::is_same<T, double>::value, double, float>;

__device__ __forceinline__ float staged(float v) {
  return v;
}
__device__ __forceinline__ double staged(double v) {
  return v;
}
__device__ __forceinline__ float staged(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float staged(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// Element j of a 16-byte vector of T, staged.
template <class T>
__device__ __forceinline__ Staged<T> staged_lane(const uint4& v, int j) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(T) == 2) {
    const unsigned short h = static_cast<unsigned short>(w[j / 2] >> (16 * (j & 1)));
    if constexpr (std::is_same<T, __half>::value)
      return __half2float(__ushort_as_half(h));
    else
      return __uint_as_float(static_cast<uint32_t>(h) << 16);
  } else if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w[j]);
  } else {
    return __hiloint2double(static_cast<int>(w[2 * j + 1]), static_cast<int>(w[2 * j]));
  }
}

// Stages a chunk's ne elements (x + e0) in rows of ts: tile t of the chunk starts at t * ts. The
// loads are 16 bytes wide with four per thread in flight (one element per load, waiting for each,
// was a third of the kernel's stalls); an unaligned input takes one element per load.
template <class T>
__device__ __forceinline__ void stage_chunk(const T* __restrict__ x, int64_t e0, int ne,
                                            Staged<T>* stage, int ts, int tile_shift, int tid,
                                            int nthreads) {
  constexpr int V = 16 / sizeof(T), U = 4, V_SHIFT = V == 8 ? 3 : V == 4 ? 2 : 1;
  const int tmask = (1 << tile_shift) - 1;
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(x + e0) & 15) == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(x + e0);
    const int nv = ne / V;
    for (int v0 = 0; v0 < nv; v0 += U * nthreads) {
      uint4 buf[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = v0 + u * nthreads + tid;
        if (v < nv) buf[u] = __ldg(src + v);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = v0 + u * nthreads + tid;
        if (v >= nv) continue;
        const int i0 = v * V;
        if (tile_shift >= V_SHIFT) {
          // The vector lies inside one tile: one row offset for its V elements.
          Staged<T>* row = stage + (i0 >> tile_shift) * ts + (i0 & tmask);
#pragma unroll
          for (int j = 0; j < V; ++j) row[j] = staged_lane<T>(buf[u], j);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const int i = i0 + j;
            stage[(i >> tile_shift) * ts + (i & tmask)] = staged_lane<T>(buf[u], j);
          }
        }
      }
    }
    done = nv * V;
  }
  for (int i = done + tid; i < ne; i += nthreads)
    stage[(i >> tile_shift) * ts + (i & tmask)] = staged(x[e0 + i]);
}

// |x|'s bits, with x * p2 left in its place and a clip counted (|x| above the clip point's
// bits). sign: bit 7 where x is negative and smask has it (signed interval bytes), else 0.
__device__ __forceinline__ uint32_t scale_in_place(float& x, float p2, uint32_t clip,
                                                   unsigned& over, uint32_t smask, uint32_t& sign) {
  const float v = x;
  x = v * p2;
  const uint32_t b = __float_as_uint(v) & 0x7FFFFFFFu;
  over += (clip - b) >> 31;  // b > clip: both below 2^31 (one shift-add, not a compare and select)
  sign = (__float_as_uint(v) >> 24) & smask;
  return b;
}

// The bytes f(i) of i = 0 .. n - 1 (n a multiple of four) into words, four to a store.
template <class F>
__device__ __forceinline__ void by_words(uint32_t* out, int n, F f) {
#pragma unroll 1
  for (int i = 0; i < n; i += 4) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) word |= f(i + j) << (8 * j);
    out[i >> 2] = word;
  }
}

// The comparisons after a bucket that holds midpoints (LutIndex::max_steps), with the magnitude
// |v| * 2^-shift formed exactly in double.
__device__ __forceinline__ int steps(const double* thr, const cb::LutIndex& ix, int k, float v,
                                     double down) {
  const double as = static_cast<double>(v) * down;
  for (int s = 0; s < ix.max_steps && k < ix.nthr && as >= thr[k]; ++s) ++k;
  return k;
}

// The high words of the W magnitudes of row k, from the lane's copy.
template <int W>
__device__ __forceinline__ void load_row(const uint4* hi, int k, int lane8, uint32_t (&w)[W]) {
  constexpr int Q = W > 8 ? W / 8 : 1;
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    const uint4 v = hi[((k * Q + q) << 3) + lane8];
    const uint32_t h[4] = {v.x, v.y, v.z, v.w};
    constexpr int J = W < 8 ? W : 8;
#pragma unroll
    for (int j = 0; j < J; ++j) w[8 * q + j] = j & 1 ? h[j / 2] & 0xFFFF0000u : h[j / 2] << 16;
  }
}

// Mapping m's entry of row k, from the lane's copy: the top 16 bits of its magnitude.
__device__ __forceinline__ uint32_t row_entry(const uint4* hi, int k, int m, int row_groups,
                                              int lane8) {
  return reinterpret_cast<const uint16_t*>(hi + ((k * row_groups + m / 8) << 3) + lane8)[m % 8];
}

__device__ __forceinline__ uint4 lds128(uint32_t address) {
  uint4 v;
  asm("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "r"(address));
  return v;
}

__device__ __forceinline__ uint32_t lds8(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(address));
  return v;
}

// Mapping m's magnitude in row k of the float rows, from the thread's copy fr.
__device__ __forceinline__ float frow_entry(const uint4* fr, int k, int m) {
  return reinterpret_cast<const float*>(fr + (k << 3) + (m >> 2))[m & 3];
}

// The W magnitudes of row k of the float rows in mapping order, from the thread's copy fr (the
// double sums' path: chunks in order, where threads sharing a copy may conflict).
template <int W>
__device__ __forceinline__ void load_frow(const uint4* fr, int k, uint32_t (&w)[W]) {
  constexpr int Q = FloatRows<W>::Q, J = W < 4 ? W : 4;
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    const uint4 v = fr[(k << 3) + q];
    const uint32_t h[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < J; ++j) w[4 * q + j] = h[j];
  }
}

// Two magnitudes in the rows' form (the top 16 bits of a double) as the top 16 bits of a float,
// for the float sums: exact for magnitudes of at most 5 significant bits between 2^-126 and 2^127
// (the host checks), zero staying zero.
__device__ __forceinline__ uint32_t float_rows(uint32_t w) {
  uint32_t r = 0;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const uint32_t h = (w >> (16 * k)) & 0xFFFFu;
    const uint32_t f = h ? ((((h >> 4) & 0x7FFu) - 896u) << 7) | ((h & 0xFu) << 3) : 0u;
    r |= f << (16 * k);
  }
  return r;
}

// The first of the n <= W sums that no later one undercuts (encode_sub's strict "less than"), and
// its value; tracked in a register, since an index into the sums would put them in local memory.
template <int W, class F>
__device__ __forceinline__ int first_least(const F (&sum)[W], int n, F& least) {
  int best = 0;
  least = sum[0];
#pragma unroll
  for (int m = 1; m < W; ++m)
    if (m < n && sum[m] < least) {
      best = m;
      least = sum[m];
    }
  return best;
}

// W: mapping columns of the tables. SCALED: an input narrower than double and a scale
// s = sm * 2^shift that is a power of two (exponent scales, sm = 1) or a float of a short
// significand sm (sums_in_scale_units). The sums then run in the scale's units:
// d' = mag * sm - a * 2^-shift is encode_sub's d times the power of two 2^-shift, exactly, as no
// step leaves the normal double range (|a| >= 2^-149 when nonzero and |shift| <= 255), so d'^2 and
// the running sums are its values scaled alike. There the subtile's mapping comes from float sums
// (two FP32 operations per element and mapping against three FP64 ones) wherever their error
// bound sets the best mapping apart from every other but those whose magnitudes equal its own on
// every element (the tie masks); the double sums run only for the mappings still near it, and for
// all of them where the bound does not hold (docs/gpu-notes.md, exactness).
// Five blocks of 128 threads per multiprocessor (registers capped at 102): the kernel is latency
// bound, and a version with four was slower (docs/performance.md v11).
template <class T, int W, bool SCALED>
__global__ void __launch_bounds__(128, 5)
    codebook_lut_kernel(const T* __restrict__ x, CbGeo g, cb::Params p, LutDev l, CbOuts o,
                        int tile_shift, Smem s) {
  using S = Staged<T>;
  extern __shared__ __align__(16) unsigned char sm[];
  const int tile = p.tile, ts = tile + 1, cw = tile / 4 + 1, nthreads = blockDim.x;
  const int sub_shift = __ffs(p.sub) - 1, subs = tile >> sub_shift;  // sub: a power of two
  uint4* hi = reinterpret_cast<uint4*>(sm + s.hi);
  double* thr = reinterpret_cast<double*>(sm + s.thr);
  uint8_t* bucket = sm + s.bucket;
  uint8_t* slot = sm + s.slot;
  uint16_t* same = reinterpret_cast<uint16_t*>(sm + s.same);
  S* stage = reinterpret_cast<S*>(sm + s.stage);
  uint32_t* cst = reinterpret_cast<uint32_t*>(sm + s.cstage);
  float* vst = reinterpret_cast<float*>(sm + s.vstage);
  // Each tile's mapping choices, the first with kDone where the tile's codes are written already.
  uint8_t* bst = sm + s.bests;
  const int tid = threadIdx.x, lane8 = tid & 7;
  // The float rows' copy and chunk rotation of this thread (FloatRows).
  constexpr int FQ = FloatRows<W>::Q;
  const uint4* fr = hi + ((tid / FQ) % FloatRows<W>::copies) * FQ;
  const int rot = tid & (FQ - 1);
  // The shared-memory addresses of the thread's t-th chunk of row 0 (row k's: + 128k), so that a
  // chunk's address costs one operation.
  uint32_t fchunk[FQ];
#pragma unroll
  for (int t = 0; t < FQ; ++t)
    fchunk[t] = static_cast<uint32_t>(__cvta_generic_to_shared(fr + ((rot + t) & (FQ - 1))));
  if constexpr (SCALED) {
    // Chunk i = (k * copies + copy) * Q + q holds mappings 4q..4q+3 of row k: half of the 16-bit
    // rows' group q / 2.
    for (int i = tid; i < (l.ix.nthr + 1) * 8; i += nthreads) {
      const int q = i & (FQ - 1);
      const uint4 v = l.hi[(i >> 3) * l.row_groups + q / 2];
      const uint32_t a = float_rows(q & 1 ? v.z : v.x), b = float_rows(q & 1 ? v.w : v.y);
      hi[i] = make_uint4(a << 16, a & 0xFFFF0000u, b << 16, b & 0xFFFF0000u);
    }
  } else {
    for (int i = tid; i < (l.ix.nthr + 1) * l.row_groups * kCopies; i += nthreads)
      hi[i] = l.hi[i / kCopies];
  }
  for (int i = tid; i < l.ix.nthr; i += nthreads) thr[i] = l.thr[i];
  for (int i = tid; i < l.ix.buckets(); i += nthreads) bucket[i] = l.bucket[i];
  for (int i = tid; i < (l.ix.nthr + 1) * W; i += nthreads) {
    slot[i] = l.slot[i];
    same[i] = l.same[i];
  }
  // Signed interval bytes (bit 7 the sign) where the code table is there; kmask takes the index.
  const bool signed_k = SCALED && s.codes >= 0;
  const uint32_t kmask = signed_k ? 0x7Fu : 0xFFu, smask = signed_k ? 0x80u : 0u;
  // The code table's rows / 256, in the low bytes of ctab_row (kCodeTableBytes).
  uint32_t ctab_row = 0;
  if (signed_k) {
    const uint32_t base =
        (static_cast<uint32_t>(__cvta_generic_to_shared(sm + s.codes)) + kCodeTableBytes - 1) &
        ~static_cast<uint32_t>(kCodeTableBytes - 1);
    ctab_row = base / kCodeTableBytes;
    uint8_t* ctab = sm + (base - static_cast<uint32_t>(__cvta_generic_to_shared(sm)));
    for (int i = tid; i < W * kCodeTableBytes; i += nthreads) {
      const int m = i / kCodeTableBytes, k = i & 0x7F;
      ctab[i] = k > l.ix.nthr ? 0
                              : static_cast<uint8_t>(cb::code_of(p.half, l.slot[k * W + m],
                                                                 (i & (kCodeTableBytes - 1)) >> 7));
    }
  }
  __syncthreads();

  const bool expo = p.kp.scale_is_exponent;
  const double inv_dmax = 1.0 / p.kp.data_max;
  unsigned long long clipped = 0, nonfinite = 0;
  const int64_t nchunks = (g.groups + nthreads - 1) / nthreads;
  for (int64_t chunk = blockIdx.x; chunk < nchunks; chunk += gridDim.x) {
    const int64_t g0 = chunk * nthreads;
    const int nt = static_cast<int>(g.groups - g0 < nthreads ? g.groups - g0 : nthreads);
    const int64_t e0 = g0 * tile;  // whole tiles only: tile t starts at element t * tile
    const int ne = nt * tile;
    stage_chunk<T>(x, e0, ne, stage, ts, tile_shift, tid, nthreads);
    __syncthreads();
    if (tid < nt) {
      const int64_t t = g0 + tid;
      S* xs = stage + tid * ts;
      uint32_t* kw = cst + tid * cw;  // intervals, then codes: bytes in words
      uint8_t* kb = reinterpret_cast<uint8_t*>(kw);
      auto interval = [&](int i) { return kb[i] & kmask; };  // element i's, without its sign
      float* v_row = vst + tid * ts;
      S amax = 0;
      int nf = 0;
      uint32_t least_nz = 0;
      if constexpr (std::is_same<S, float>::value) {
        // Non-negative floats order as their bits; Inf and NaN lie above every finite one.
        // mn + 1: the least nonzero magnitude's bits (0 when every element is zero).
        uint32_t mx = 0, mn = ~0u;
#pragma unroll 8
        for (int i = 0; i < tile; ++i) {
          const uint32_t b = __float_as_uint(xs[i]) & 0x7FFFFFFFu;
          mx = max(mx, b);
          mn = min(mn, b - 1u);
        }
        least_nz = mn + 1u;
        if (mx < 0x7F800000u)
          amax = __uint_as_float(mx);
        else
          for (int i = 0; i < tile; ++i)
            nf += (__float_as_uint(xs[i]) & 0x7FFFFFFFu) >= 0x7F800000u;
      } else {
        for (int i = 0; i < tile; ++i) {
          const S a = fabs(xs[i]);
          if (!(a - a == 0))
            ++nf;
          else if (a > amax)
            amax = a;
        }
      }
      // The scaled kernel's float scales pass fast_quant_ok (sums_in_scale_units).
      const castscope::detail::GroupScale gs =
          SCALED && !expo
              ? choose_float_scale_fast(p.kp, static_cast<double>(amax), nf > 0, inv_dmax)
              : castscope::detail::choose_scale(p.kp, static_cast<double>(amax), 0, 0, nf > 0);
      if (o.scale) store_code(o.scale, o.scale_size, t, gs.scale_code, p.kp.scale);
      nonfinite += nf;
      uint8_t* bests = bst + tid * subs;
      const bool usable = cb::scale_usable(p, gs);
      // The scale is sm * 2^shift: exponent scales have sm = 1; in the scaled kernel a float
      // scale has a short significand sm (the host checks) and shift its binade.
      int shift = gs.shift;
      float sm = 1.0f;
      if (SCALED && usable && !expo) {
        shift = static_cast<int>((scalar::double_bits(gs.s) >> 52) & 0x7FF) - 1023;
        sm = static_cast<float>(gs.s * scalar::pow2(-shift));
      }
      // The scaled kernel keeps x * 2^-shift in the stage: exact floats where every nonzero |x|
      // and |x| * 2^-shift are normal (exponent fields from max(1, shift + 1) to 254 + shift).
      // Other tiles, with subnormals or elements 2^126 below the scale, take encode_sub.
      const bool exact =
          !SCALED || !usable || least_nz == 0 ||
          (least_nz >= (static_cast<uint32_t>(max(1, shift + 1)) << 23) &&
           static_cast<int>(__float_as_uint(static_cast<float>(amax)) >> 23) - shift <= 254);
      if (!exact || !usable) {
        // encode_sub itself: every value takes slot 0 (or NaN) where the scale is not usable. It
        // writes the codes and values; its choices go out with everyone else's.
        if (usable)
          for (int i = 0; i < tile; ++i) clipped += cb::scaled_abs(p, gs, xs[i]) > p.kp.data_max;
        cb::encode_subtiles(p, gs, xs, tile, subs, 0, 0, o.codes ? kb : nullptr,
                            o.values ? v_row : nullptr, bests);
        bests[0] |= kDone;
      } else {
        const double down = SCALED || expo ? scalar::pow2(-shift) : 0.0;
        const double up = expo ? scalar::pow2(gs.shift) : gs.s;
        auto scaled = [&](double a) { return expo ? a * down : __ddiv_rn(a, gs.s); };
        // Intervals first, in a loop of independent iterations whose shared-memory loads overlap;
        // the sums then read them back (and the codes overwrite them).
        if constexpr (SCALED) {
          // |x| / s > data_max exactly when |x| exceeds the float below data_max * s (exact in
          // double): no float lies between the two. Both are non-negative, so their bits compare
          // as they do.
          const uint32_t clip = __float_as_uint(__double2float_rd(p.kp.data_max * up));
          const int sb = l.ix.sub_bits;
          const float p2 = static_cast<float>(down);  // 2^-shift: exact, subnormal at 2^-127
          unsigned over = 0;
          if (!expo) {
            // Float scales: q = |x| * RU(1 / s) rounded up is at least |x| / s and within two of
            // its ulps, so its bucket is |x| / s's or the next (buckets split binades and are
            // 2^(23 - sub_bits) ulps wide); the bucket's lower end times s, an exact product of
            // few bits, decides (docs/gpu-notes.md, exactness).
            const float s_f = static_cast<float>(gs.s), r_u = __frcp_ru(s_f);
            const int key0 = (126 + l.ix.emin) << sb, key1 = key0 + l.ix.buckets() - 1;
            const int fb = 23 - sb;
            by_words(kw, tile, [&](int i) {
              uint32_t sign;
              const uint32_t b = scale_in_place(xs[i], p2, clip, over, smask, sign);
              const uint32_t qb = __float_as_uint(__fmul_ru(__uint_as_float(b), r_u));
              // Clamped at the second entry: the first and everything below it hold 0.
              const int key = min(max(static_cast<int>(qb >> fb), key0 + 1), key1);
              const uint32_t lo = __float_as_uint(
                  __fmul_rn(s_f, __uint_as_float(static_cast<uint32_t>(key) << fb)));
              return bucket[key - key0 - static_cast<int>(b < lo)] | sign;
            });
          } else {
            // The bucket key of |x| * 2^-shift is that of |x| with the exponent moved by -shift:
            // key0 is the key of 2^(emin - 1) * 2^shift as a float's. Where it is not negative, a
            // zero or subnormal |x| (exponent field 0) lies below 2^emin * 2^shift and its key
            // below the first bucket, as it should; elsewhere those take the double.
            const int lead = 126 + shift + l.ix.emin, key0 = lead * (1 << sb);
            if (lead >= 0) {
              by_words(kw, tile, [&](int i) {
                uint32_t sign;
                const uint32_t b = scale_in_place(xs[i], p2, clip, over, smask, sign);
                int k = bucket[cb::bucket_index(static_cast<int>(b >> (23 - sb)), key0, l.ix)];
                if (l.ix.max_steps) k = steps(thr, l.ix, k, __uint_as_float(b), down);
                return static_cast<uint32_t>(k) | sign;
              });
            } else {
              by_words(kw, tile, [&](int i) {
                uint32_t sign;
                const uint32_t b = scale_in_place(xs[i], p2, clip, over, smask, sign);
                const double as = static_cast<double>(__uint_as_float(b)) * down;
                return static_cast<uint32_t>(cb::interval_of(thr, bucket, l.ix, as)) | sign;
              });
            }
          }
          clipped += over;
        } else {
#pragma unroll 4
          for (int i = 0; i < tile; ++i) {
            const double as = scaled(fabs(static_cast<double>(xs[i])));
            clipped += as > p.kp.data_max;
            kb[i] = static_cast<uint8_t>(cb::interval_of(thr, bucket, l.ix, as));
          }
        }
        for (int s0 = 0, si = 0; s0 < tile; s0 += p.sub, ++si) {
          int best = 0;
          bool open = true;
          if constexpr (SCALED) {
            // Float sums first; the double sums only where they cannot settle the choice
            // (docs/gpu-notes.md, exactness: codebook float sums).
            float fs[W];
#pragma unroll
            for (int m = 0; m < W; ++m) fs[m] = 0.0f;
            const float as_max = static_cast<float>(amax) * static_cast<float>(down);
            auto add = [&](uint32_t k, float as) {
              uint32_t w[4 * FQ];
#pragma unroll
              for (int t = 0; t < FQ; ++t) {
                const uint4 v = lds128(fchunk[t] + (k << 7));
                w[4 * t] = v.x;
                w[4 * t + 1] = v.y;
                w[4 * t + 2] = v.z;
                w[4 * t + 3] = v.w;
              }
#pragma unroll
              for (int m = 0; m < W; ++m) {
                // Slot m (FloatRows). mag * sm is exact (at most 5 and 19 significant bits): one
                // rounding.
                const float d = __fmaf_rn(__uint_as_float(w[m]), sm, -as);
                fs[m] = fmaf(d, d, fs[m]);
              }
            };
            if (p.sub >= 4) {
              // Subtiles of whole interval words: one load per four elements.
#pragma unroll 1
              for (int i = s0; i < s0 + p.sub; i += 4) {
                const uint32_t ks = kw[i >> 2];
#pragma unroll
                for (int j = 0; j < 4; ++j) add((ks >> (8 * j)) & kmask, fabsf(xs[i + j]));
              }
            } else {
              // The next element's interval is read ahead (kb holds at least three bytes past
              // the tile).
              uint32_t k_next = interval(s0);
#pragma unroll 1
              for (int i = s0; i < s0 + p.sub; ++i) {
                const uint32_t k = k_next;
                k_next = interval(i + 1);
                add(k, fabsf(xs[i]));
              }
            }
            // Columns past the mappings (magnitude 0 in the tables) become infinite: never the
            // least, never near it.
            if (p.nmaps < W)
#pragma unroll
              for (int m = 0; m < W; ++m)
                if (slot_mapping(m, rot, FQ) >= p.nmaps) fs[m] = __int_as_float(0x7F800000);
            // The least sum with its last four bits replaced by its slot: non-negative floats order
            // as their bits, so the least key's mapping has a sum within 15 units in the last place
            // of the least one. Its key with those bits set bounds its sum from above, and so the
            // limit.
            constexpr int C = W < 4 ? W : 4;  // independent chains
            uint32_t key[C];
#pragma unroll
            for (int c = 0; c < C; ++c) key[c] = ~0u;
#pragma unroll
            for (int m = 0; m < W; ++m)
              key[m % C] = min(key[m % C], (__float_as_uint(fs[m]) & ~15u) | m);
#pragma unroll
            for (int c = 1; c < C; ++c) key[0] = min(key[0], key[c]);
            best = slot_mapping(static_cast<int>(key[0] & 15u), rot, FQ);
            const float least = __uint_as_float(key[0] | 15u);
            const uint32_t lim =
                __float_as_uint(__fadd_ru(__fmul_ru(least, 1.0f + 0x1p-13f), 0x1p-96f));
            const bool big = !(as_max <= 0x1p40f);
            unsigned near = 0;
#pragma unroll
            for (int m = 0; m < W; ++m) near |= (__float_as_uint(fs[m]) <= lim ? 1u : 0u) << m;
            // Slots to mappings: slot chunk t is mapping chunk rot + t, a rotation by 4 * rot bits.
            if (FQ > 1) near = ((near << (4 * rot)) | (near >> (W - 4 * rot))) & ((1u << W) - 1);
            near &= ~(1u << best);
            if (near && !big) {
              // Mappings whose magnitudes equal the best one's on every element have its sums,
              // float and double alike: the lowest index among them stands for them all.
              unsigned agree = 0xFFFFu;
              for (int i = s0; i < s0 + p.sub; ++i) agree &= same[interval(i) * W + best];
              best = __ffs(agree) - 1;
              near &= ~agree;
              // The choice lies among the best and the mappings still near it (every other one's
              // double sum exceeds the best's): their double sums alone, in index order.
              if (near) {
                unsigned cand = near | 1u << best;
                double least_sse = 0.0;
                for (int first = 1; cand; cand &= cand - 1, first = 0) {
                  const int m = __ffs(cand) - 1;
                  double sse = 0.0;
                  for (int i = s0; i < s0 + p.sub; ++i) {
                    const double as = fabs(static_cast<double>(xs[i]));
                    const double mag = static_cast<double>(frow_entry(fr, interval(i), m));
                    const double d = __fma_rn(mag, static_cast<double>(sm), -as);
                    sse = __dadd_rn(sse, __dmul_rn(d, d));
                  }
                  if (first || sse < least_sse) {
                    best = m;
                    least_sse = sse;
                  }
                }
              }
            }
            open = big;
          }
          if (open) {
            double sse[W];
#pragma unroll
            for (int m = 0; m < W; ++m) sse[m] = 0;
#pragma unroll 2
            for (int i = s0; i < s0 + p.sub; ++i) {
              const double a = fabs(static_cast<double>(xs[i]));  // the scaled kernel's: scaled
              uint32_t w[W];
              if constexpr (SCALED)
                load_frow<W>(fr, interval(i), w);
              else
                load_row<W>(hi, interval(i), lane8, w);
#pragma unroll
              for (int m = 0; m < W; ++m) {
                const double mag = SCALED ? static_cast<double>(__uint_as_float(w[m]))
                                          : __hiloint2double(static_cast<int>(w[m]), 0);
                // mag * sm and mag * up are exact (a magnitude of at most 5 significant bits,
                // checked with the tables, times a scale of at most 48, checked at launch), so
                // one rounding of mag * up - a is encode_sub's rounded difference, and of mag *
                // sm - a (scaled) the same times 2^-shift.
                const double d = __fma_rn(mag, SCALED ? static_cast<double>(sm) : up, -a);
                sse[m] = __dadd_rn(sse[m], __dmul_rn(d, d));
              }
            }
            double least = 0.0;
            best = first_least<W>(sse, p.nmaps, least);
          }
          bests[si] = static_cast<uint8_t>(best);
          if (o.values)
            for (int i = s0; i < s0 + p.sub; ++i) {
              const S v = xs[i];
              const double mag =
                  SCALED ? static_cast<double>(frow_entry(fr, interval(i), best))
                         : __hiloint2double(
                               static_cast<int>(
                                   row_entry(hi, interval(i), best, l.row_groups, lane8) << 16),
                               0);
              const double u = mag * up;
              v_row[i] = scalar::to_f32(signbit(v) ? -u : u);
            }
        }
      }
    }
    __syncthreads();
    // Codes four at a time from the intervals, the signs and the choices, and the choices
    // themselves, in the order they are stored: consecutive threads take consecutive words.
    if (o.codes) {
      const int words = ne / 4, per = tile / 4;
      uint32_t* out = reinterpret_cast<uint32_t*>(o.codes + e0);
      for (int i = tid; i < words; i += nthreads) {
        const int tt = i >> (tile_shift - 2), w = i & (per - 1);
        const uint32_t ks = cst[tt * cw + w];
        const uint8_t* bt = bst + tt * subs;
        if (bt[0] & kDone) {
          out[i] = ks;
          continue;
        }
        if (signed_k) {
          // Byte j's address: byte j of ks under the row's address / 256 (kCodeTableBytes).
          const uint32_t row = ctab_row + bt[w >> (sub_shift - 2)];
          const uint32_t c0 = lds8(__byte_perm(ks, row, 0x6540)),
                         c1 = lds8(__byte_perm(ks, row, 0x6541)),
                         c2 = lds8(__byte_perm(ks, row, 0x6542)),
                         c3 = lds8(__byte_perm(ks, row, 0x6543));
          out[i] = __byte_perm(__byte_perm(c0, c1, 0x0040), __byte_perm(c2, c3, 0x0040), 0x5410);
          continue;
        }
        const S* xr = stage + tt * ts + 4 * w;
        uint32_t r = 0;
        if (sub_shift >= 2) {
          const uint8_t* sl = slot + bt[w >> (sub_shift - 2)];
#pragma unroll
          for (int j = 0; j < 4; ++j)
            r |= cb::code_of(p.half, sl[((ks >> (8 * j)) & 0xFF) * W], signbit(xr[j])) << (8 * j);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int k = (ks >> (8 * j)) & 0xFF, best = bt[(4 * w + j) >> sub_shift];
            r |= cb::code_of(p.half, slot[k * W + best], signbit(xr[j])) << (8 * j);
          }
        }
        out[i] = r;
      }
    }
    // Rows hold whole tiles here (C % tile == 0), so tile t's subtiles are meta entries t * subs
    // onwards.
    if (o.meta)
      for (int i = tid; i < nt * subs; i += nthreads)
        o.meta[g0 * subs + i] = static_cast<uint8_t>(bst[i] & ~kDone);
    if (o.values)
      for (int i = tid; i < ne; i += nthreads)
        o.values[e0 + i] = vst[(i >> tile_shift) * ts + (i & (tile - 1))];
    __syncthreads();
  }
  if (clipped) atomicAdd(o.counts, clipped);
  if (nonfinite) atomicAdd(o.counts + 1, nonfinite);
}

}  // namespace castscope::gpu::detail::codebook_kernel
