// The lean kernel for the hottest casts, from float32 or bfloat16 input: MX tiles (1-D tiles of
// 8, 16 or 32 along a contiguous last axis, an exponent scale), NVFP4 (16-value tiles, e4m3
// scales under a float32 tensor scale) and unscaled casts to e4m3fn / e5m2 / bfloat16, all with
// round to nearest even and saturation, codes only. Its results are fast_kernel's (MODE 1 and 3)
// and unscaled_vec_kernel's bit for bit: the same scale choice and the same code functions. What
// differs is the work around them, which left those kernels issue-bound at 70 to 80% of the copy
// bandwidth from bfloat16:
// - the input stays raw; a lane's largest magnitude is an integer maximum of the magnitude bits
//   (two bfloat16 at a time), and so is the test for NaN / Inf (their bits exceed every finite
//   value's), instead of a finite test and a float maximum per element;
// - the clipped and non-finite counts are taken only in lanes that can have any: clipping is
//   monotone in the magnitude, so a lane clips an element exactly when its largest one clips;
// - e4m3fn / e5m2 codes are converted two at a time (cvt ... e4m3x2.f32), and from bfloat16 the
//   e2m1 codes of MXFP4 and NVFP4 and MX's int8 codes too, with packed bfloat16 arithmetic
//   (bf16_pairs.cuh);
// - a lane takes a whole tile of up to four 16-byte chunks, so that the tile's scale is worked out
//   once, not in every lane of the tile (lean_chunks_per_lane);
// - four 16-byte loads are in flight per thread.
#pragma once

#include <type_traits>

#include "backends/cuda/bf16_pairs.cuh"
#include "backends/cuda/cast_kernels.cuh"

namespace castscope::gpu::detail {

constexpr int kLeanRounds = 4;  // 16-byte loads in flight per thread

// 16 bytes of float32 or bfloat16 input as raw words.
template <class T>
struct Raw;
template <>
struct Raw<float> {
  static constexpr int V = 4;
  __device__ __forceinline__ static float value(const uint32_t (&w)[4], int k) {
    return __uint_as_float(w[k]);
  }
  // The largest magnitude's bits, as a float32's.
  __device__ __forceinline__ static uint32_t absmax_bits(const uint32_t (&w)[4]) {
    return max(max(w[0] & 0x7FFFFFFFu, w[1] & 0x7FFFFFFFu),
               max(w[2] & 0x7FFFFFFFu, w[3] & 0x7FFFFFFFu));
  }
};
template <>
struct Raw<__nv_bfloat16> {
  static constexpr int V = 8;
  __device__ __forceinline__ static float value(const uint32_t (&w)[4], int k) {
    return __uint_as_float(k % 2 == 0 ? w[k / 2] << 16 : w[k / 2] & 0xFFFF0000u);
  }
  __device__ __forceinline__ static uint32_t max2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t d;
    asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return __vmaxu2(a, b);
#endif
  }
  __device__ __forceinline__ static uint32_t absmax_bits(const uint32_t (&w)[4]) {
    const uint32_t m = max2(max2(w[0] & 0x7FFF7FFFu, w[1] & 0x7FFF7FFFu),
                            max2(w[2] & 0x7FFF7FFFu, w[3] & 0x7FFF7FFFu));
    return max(m & 0xFFFFu, m >> 16) << 16;
  }
};

__device__ __forceinline__ void load_raw(const void* p, uint32_t (&w)[4]) {
  const uint4 a = __ldg(static_cast<const uint4*>(p));
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
}

// The grid-stride loop of the lean kernels over `total` units of P consecutive 16-byte chunks:
// each thread loads the units base + u * stride + lane of a round (U * P loads in flight before
// any is used; zeros past the end), then calls body(raw, c) for each with raw its P chunks and c
// its unit index. Rounds wholly past the end are skipped by the whole warp; lanes past it within a
// round still get the call (with c >= total), so that warp shuffles in the body see every lane.
template <int U, int P = 1, class T, class Body>
__device__ __forceinline__ void lean_rounds(const T* __restrict__ x, int64_t total, Body&& body) {
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) - lane;
       base < total; base += U * stride) {
    uint32_t raw[U][P][4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * stride + lane;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        if (c < total)
          load_raw(x + (c * P + p) * V, raw[u][p]);
        else
          raw[u][p][0] = raw[u][p][1] = raw[u][p][2] = raw[u][p][3] = 0;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * stride >= total) break;  // the whole warp is past the end
      body(raw[u], base + u * stride + lane);
    }
  }
}

// The largest of `bits` over the L lanes of a tile (xor butterfly: every lane gets it).
template <int L>
__device__ __forceinline__ uint32_t tile_max_bits(uint32_t bits) {
#pragma unroll
  for (int m = 1; m < L; m <<= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, m));
  return bits;
}

// Four e4m3fn / e5m2 codes of finite values, converted two at a time, as the bytes of a word.
template <__nv_fp8_interpretation_t K>
__device__ __forceinline__ uint32_t fp8x4(float y0, float y1, float y2, float y3) {
  const float2 a = make_float2(y0, y1), b = make_float2(y2, y3);
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, K)) |
         static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, K)) << 16;
}

// N words to dst (aligned to the store's size) in stores of up to 16 bytes.
template <int N>
__device__ __forceinline__ void store_words(uint8_t* dst, const uint32_t (&w)[N]) {
  static_assert(N == 1 || N == 2 || N % 4 == 0, "stores of 4, 8 or 16 bytes");
  if constexpr (N == 1) {
    *reinterpret_cast<uint32_t*>(dst) = w[0];
  } else if constexpr (N == 2) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<uint4*>(dst + 4 * i) = make_uint4(w[i], w[i + 1], w[i + 2], w[i + 3]);
  }
}

// Codes of a lane's V elements as the little-endian bytes the output holds (codes of CB bytes,
// or two per byte when pack4); NB = V * CB bytes at most.
template <int V, int CB>
struct LaneCodes {
  static constexpr int NW = (V * CB + 3) / 4;
  uint32_t w[NW];
  __device__ __forceinline__ void pack(const uint32_t (&code)[V], bool pack4) {
    if (pack4) {
      uint32_t p = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) p |= (code[k] & 0xFu) << (4 * k);
      w[0] = p;
      return;
    }
#pragma unroll
    for (int q = 0; q < NW; ++q) {
      uint32_t p = 0;
#pragma unroll
      for (int b = 0; b < 4 / CB; ++b)
        p |= (code[q * 4 / CB + b] & ((1u << (8 * CB)) - 1u)) << (8 * CB * b);
      w[q] = p;
    }
  }
  // Eight one-byte codes as code_bytes gives them (values 0-3, 4-7), or their nibbles.
  __device__ __forceinline__ void set_bytes(uint32_t b0, uint32_t b1, bool pack4) {
    static_assert(V == 8 && CB == 1, "eight codes of one byte");
    if (pack4) {
      w[0] = code_nibbles(b0, b1);
    } else {
      w[0] = b0;
      w[1 % NW] = b1;
    }
  }
};

// The codes of a lane's P chunks (P * V elements from e0, a multiple of P * V) in one store.
template <int P, int V, int CB>
__device__ __forceinline__ void store_codes(const LaneCodes<V, CB> (&out)[P], void* codes,
                                            int64_t e0, bool pack4) {
  uint8_t* base = static_cast<uint8_t*>(codes);
  constexpr int NW = LaneCodes<V, CB>::NW;
  if (pack4) {
    static_assert(V == 4 || V == 8, "nibbles of 16-byte chunks");
    if constexpr (P * V == 4) {  // two bytes
      *reinterpret_cast<uint16_t*>(base + e0 / 2) = static_cast<uint16_t>(out[0].w[0]);
    } else {
      constexpr int W = P * V / 8;
      uint32_t w[W];
#pragma unroll
      for (int i = 0; i < W; ++i)
        w[i] = V == 8 ? out[i].w[0] : out[2 * i].w[0] | out[(2 * i + 1) % P].w[0] << 16;
      store_words(base + e0 / 2, w);
    }
    return;
  }
  uint32_t w[P * NW];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int q = 0; q < NW; ++q) w[p * NW + q] = out[p].w[q];
  store_words(base + e0 * CB, w);
}

// Codes of a finite y on grid F (kBF16: bfloat16, either overflow policy).
template <int F>
__device__ __forceinline__ uint32_t lean_code(float y, const KernelParams& kp, bool& clipped) {
  if constexpr (F == kBF16)
    return code_bf16(y, kp.overflow == scalar::Overflow::Saturate, clipped);
  else
    return code_static<F>(y, clipped);
}

// What scales a lean_kernel cast: none (TILE = V, `count` = 16-byte chunks), an exponent per
// tile (MX), or NVFP4's e4m3 tile scale under a float32 tensor scale (`count` = tiles).
enum LeanScale { kUnscaled = 0, kExponent = 1, kNvfp4 = 2 };

// Chunks of 16 bytes per lane in lean_kernel: a whole tile, of up to four chunks. When the lanes
// of a tile shared it, each worked out its scale (for NVFP4 a scale and seven thresholds, about
// 45 instructions); one lane per tile does that once. Its loads, 16 bytes apart, leave sectors
// half used per instruction but whole across the lane's loads (docs/performance.md, v16).
template <class T, int TILE, int KIND>
constexpr int lean_chunks_per_lane() {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  return KIND == kUnscaled ? 1 : TILE / V < 4 ? TILE / V : 4;
}

// F is the data grid's compile-time copy (kE2M1FNUZ for NVFP4).
template <class T, int TILE, int F, int KIND>
__global__ void __launch_bounds__(256)
    lean_kernel(const T* __restrict__ x, int64_t count, KernelParams kp, Scratch* s, Outs o) {
  kp.data = kp.data_codes = static_format(F);
  using R = Raw<T>;
  constexpr int V = R::V;
  constexpr int P = lean_chunks_per_lane<T, TILE, KIND>();
  constexpr int L = TILE / (V * P);
  constexpr int U = kLeanRounds / P;  // the same bytes in flight for every P
  static_assert(kLeanRounds % P == 0, "chunks per lane divide the loads in flight");
  constexpr int CB = F == kBF16 ? 2 : 1;
  constexpr bool kPair = KIND != kNvfp4 && (F == kE4M3FN || F == kE5M2);
  // One multiply scales exactly when 2^-shift is a normal float. The host passes scales with a
  // bias of at most 127, so shift >= -127; the exponent chosen is at most float's top binade
  // plus one, so shift <= 128 - emax.
  constexpr bool kOneMul = static_format(F).emax >= 2;
  static_assert(L >= 1 && L <= 32 && (32 % L) == 0 && L * V * P == TILE,
                "lanes per tile must divide a warp");
  static_assert(KIND != kUnscaled || L == 1, "an unscaled cast has no tiles");
  static_assert(KIND != kNvfp4 || F == kE2M1FNUZ, "NVFP4 data is e2m1");
  // bfloat16 input coded two values at a time (bf16_pairs.cuh): MXFP4, MX int8 and NVFP4, which
  // were issue-bound. MXFP6's e2m3 has lines too, but its casts wait on memory more than on issue
  // and ran 1% slower with them (docs/performance.md, v15).
  constexpr bool kLines = KIND == kExponent && V == 8 && (F == kE2M1FNUZ || F == kInt8Fixed);
  constexpr bool kThrPairs = KIND == kNvfp4 && V == 8;
  using Lines = std::conditional_t<
      !kLines, char,
      std::conditional_t<F == kInt8Fixed, Int8LinesX2, OcpLinesX2<F == kE2M1FNUZ ? F : kE2M1FNUZ>>>;
  // NVFP4 as fast_kernel's MODE 3 takes it: a positive float tensor scale t with RN(1 / (t *
  // data_max)) normal in float. Any other tensor scale (NaN, extreme) is left to fast_kernel,
  // which the host launches after this kernel for the same cast.
  double inv_td = 0.0;
  float tf = 0.0f, inv_tf = 0.0f;
  if constexpr (KIND == kNvfp4) {
    kp.tensor_scale = s->tensor_scale;
    inv_td = 1.0 / (kp.tensor_scale * kp.data_max);
    tf = static_cast<float>(kp.tensor_scale);
    if (!nvfp4_fits(kp.tensor_scale, inv_td)) return;
    inv_tf = static_cast<float>(inv_td);
  }
  const int lane = threadIdx.x & 31;
  const int64_t total = count * L;
  unsigned clipped = 0, nonfinite = 0;
  uint8_t* scale_bytes = static_cast<uint8_t*>(o.scale);
  const bool plain_binade = binade_only(kp.data, kp.scale_mode);
  lean_rounds<U, P>(x, total, [&](const uint32_t(&raw)[P][4], int64_t c) {
    uint32_t lane_bits = R::absmax_bits(raw[0]);
#pragma unroll
    for (int p = 1; p < P; ++p) lane_bits = max(lane_bits, R::absmax_bits(raw[p]));
    const uint32_t bits = tile_max_bits<L>(lane_bits);
    if (c >= total) return;
    const int64_t e0 = c * (V * P);
    const float am = __uint_as_float(bits);
    const bool nan_tile = KIND != kUnscaled && bits >= 0x7F800000u;
    bool zero_scale = false;  // NVFP4 tile below the e4m3 range: sign-only codes
    float f1 = 1.0f, f2 = 1.0f;
    int shift = 0;
    E2m1Thresholds thr{};
    Lines lines{};
    bool pairs = false;  // the two-at-a-time code path applies to this tile
    if constexpr (KIND == kExponent) {
      GroupScale gs;
      if (plain_binade && bits >= 0x00800000u && !nan_tile) {
        // choose_exp_scale_f32 for a normal absmax, whose binade is its exponent field, without
        // its branches: calling it for every tile took mxfp4e2 from bfloat16 to 0.295-0.300 ms
        // against 0.285.
        gs.scale_code =
            static_cast<uint32_t>(exp_scale_code(kp, static_cast<int>(bits >> 23) - 127));
        gs.shift = static_cast<int>(gs.scale_code) - kp.scale.bias;
      } else {
        gs = choose_exp_scale_f32(kp, am, nan_tile);
      }
      // Exponent scale codes of one byte (the host checks): no sign to extend.
      if (lane % L == 0) scale_bytes[static_cast<uint64_t>(c) / L] = gs.scale_code;
      shift = gs.shift;
      if constexpr (kLines) pairs = lines.set(shift);
      if (kOneMul) {
        f1 = pow2f(-gs.shift);
      } else {
        const int h1 = -gs.shift / 2;
        f1 = pow2f(h1), f2 = pow2f(-gs.shift - h1);
      }
    } else if constexpr (KIND == kNvfp4) {
      const GroupScale gs = choose_e4m3_scale_f32(kp, am, nan_tile, inv_tf, [&] {
        return choose_float_scale_fast(kp, am, nan_tile, inv_td);
      });
      if (lane % L == 0) scale_bytes[static_cast<uint64_t>(c) / L] = gs.scale_code;
      // gs.s as a float, decoded from the code (gs.s is its double): no double conversions.
      const float sf = e4m3_value(gs.scale_code);
      zero_scale = !gs.nan && sf == 0.0f;
      thr = e2m1_thresholds(sf, tf);
      pairs = kThrPairs;
    }
    // x / 2^shift for MX, exact: its code is the shared quantizer's code of the quotient.
    auto scaled = [&](float v) { return KIND == kUnscaled ? v : kOneMul ? v * f1 : v * f1 * f2; };
    // The code of a finite element (NVFP4: the thresholds of RN(x / (s * t))).
    auto code_of = [&](float v, bool& cl) -> uint32_t {
      if constexpr (KIND == kNvfp4)
        return code_e2m1fnuz_thr(v, thr, cl);
      else
        return lean_code<F>(scaled(v), kp, cl);
    };
    using Codes = LaneCodes<V, CB>;
    Codes out[P];
    if (nan_tile) {  // a NaN / Inf in the tile: every code 0, the scale says NaN
#pragma unroll
      for (int p = 0; p < P; ++p) {
#pragma unroll
        for (int k = 0; k < V; ++k)
          nonfinite += (__float_as_uint(R::value(raw[p], k)) & 0x7FFFFFFFu) >= 0x7F800000u;
#pragma unroll
        for (int q = 0; q < Codes::NW; ++q) out[p].w[q] = 0;
      }
    } else if (zero_scale) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        uint32_t code[V];
#pragma unroll
        for (int k = 0; k < V; ++k) code[k] = code_e2m1_zero_scale(R::value(raw[p], k), false);
        out[p].pack(code, o.pack4);
      }
    } else if (KIND == kUnscaled && lane_bits >= 0x7F800000u) {  // NaN / Inf: the shared path
      const GroupScale gs{};
#pragma unroll
      for (int p = 0; p < P; ++p) {
        uint32_t code[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xv = R::value(raw[p], k);
          bool cl = false;
          if (!(xv - xv == 0.0f)) {
            ++nonfinite;
            unsigned long long c2 = 0;
            code[k] = element_out(kp, gs, xv, 0, e0 + p * V + k, o, c2);
            clipped += static_cast<unsigned>(c2);
            continue;
          }
          code[k] = code_of(xv, cl);
          clipped += cl ? 1 : 0;
        }
        out[p].pack(code, o.pack4);
      }
    } else {
      if constexpr (kPair) {
        constexpr __nv_fp8_interpretation_t kind = F == kE4M3FN ? __NV_E4M3 : __NV_E5M2;
#pragma unroll
        for (int p = 0; p < P; ++p) {
          auto y = [&](int k) { return scaled(R::value(raw[p], k)); };
#pragma unroll
          for (int q = 0; q < V / 4; ++q)
            out[p].w[q] = fp8x4<kind>(y(4 * q), y(4 * q + 1), y(4 * q + 2), y(4 * q + 3));
        }
      } else if (pairs) {
        if constexpr (kLines || kThrPairs) {
          E2m1ThresholdsX2 thr2{};
          if constexpr (kThrPairs) thr2 = bf16_pairs(thr);
          constexpr int kSignBit = static_format(F).ebits + static_format(F).mbits;
#pragma unroll
          for (int p = 0; p < P; ++p) {
            uint32_t mag[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const uint32_t a2 = raw[p][q] & 0x7FFF7FFFu;
              if constexpr (kLines)
                mag[q] = lines.magnitudes(a2);
              else
                mag[q] = e2m1_magnitudes_thr(a2, thr2);
            }
            auto codes4 = [&](int q) {
              if constexpr (kLines)
                return Lines::codes(mag[q], mag[q + 1], raw[p][q], raw[p][q + 1]);
              else
                return code_bytes<kSignBit>(mag[q], mag[q + 1], raw[p][q], raw[p][q + 1]);
            };
            out[p].set_bytes(codes4(0), codes4(2), o.pack4);
          }
        }
      } else {
#pragma unroll
        for (int p = 0; p < P; ++p) {
          uint32_t code[V];
#pragma unroll
          for (int k = 0; k < V; ++k) {
            bool cl = false;
            code[k] = code_of(R::value(raw[p], k), cl);
          }
          out[p].pack(code, o.pack4);
        }
      }
      // Whether the lane's largest magnitude clips, as the code functions decide it.
      bool lane_clips = false;
      const float lane_max = __uint_as_float(lane_bits);
      if constexpr (KIND == kNvfp4)
        lane_clips = lane_max >= thr.t[7];
      else if constexpr (F == kBF16)
        code_of(lane_max, lane_clips);
      else
        lane_clips = clips(scaled(lane_max), clip_static<F>());
      if (lane_clips) {
        // bfloat16 under an exponent scale: |x| clips when its bits reach those of the clip point
        // times 2^shift (a bfloat16 while a normal float), two halves per word compared at once.
        constexpr int kClipGrid = KIND == kExponent ? F : kE2M1FNUZ;  // unused for other kinds
        constexpr ClipAt kClip = clip_static<kClipGrid>();
        static_assert(2 * static_format(kClipGrid).maxr + 1 < 256, "clip point not a bfloat16");
        const uint32_t tb = __float_as_uint(kClip.at) + (static_cast<uint32_t>(shift) << 23);
        const int te = static_cast<int>(__float_as_uint(kClip.at) >> 23) + shift;
#pragma unroll
        for (int p = 0; p < P; ++p) {
          if (KIND == kExponent && V == 8 && te >= 1 && te <= 254) {
            const uint32_t t16 = (tb >> 16) + (kClip.strict ? 1u : 0u);
            const uint32_t t2 = t16 | (t16 << 16);
            uint32_t f = 0;
#pragma unroll
            for (int q = 0; q < 4; ++q) f |= (((raw[p][q] | 0x80008000u) - t2) & 0x80008000u) >> q;
            clipped += __popc(f);
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              bool cl = false;
              code_of(R::value(raw[p], k), cl);
              clipped += cl ? 1 : 0;
            }
          }
        }
      }
    }
    store_codes(out, o.codes, e0, o.pack4);
  });
  add_counts(s, clipped, nonfinite, 0);
}

}  // namespace castscope::gpu::detail
