// The fast path's loops, compiled twice (AVX2 and baseline) and picked at load time. The
// multiversioned entry points are plain functions because compilers do not clone templates.
#include "backends/cpu/fast_tile.hpp"

namespace castscope::cpu::fast {
namespace {

template <int Mode>
inline __attribute__((always_inline)) int64_t values_loop(const TileParams& t, const float* x,
                                                          int n, int s, uint64_t first,
                                                          float* values) {
  int64_t clipped = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t r, neg, over;
    int qe;
    cast_one<Mode>(t, scalar::float_bits(x[i]), s, first + i, r, qe, neg, over);
    const int k = qe + s;
    const uint32_t p2 = k >= -126 ? static_cast<uint32_t>(k + 127) << 23 : 1u << ((k + 149) & 31);
    const float v = static_cast<float>(static_cast<int32_t>(r)) * scalar::bits_float(p2);
    values[i] = scalar::bits_float(scalar::float_bits(v) | (neg << 31));
    clipped += over;
  }
  return clipped;
}

template <int Mode>
inline __attribute__((always_inline)) int64_t codes_loop(const TileParams& t, const float* x, int n,
                                                         int s, uint64_t first, uint32_t* rr,
                                                         int32_t* qq, uint8_t* ng) {
  int64_t clipped = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t r, neg, over;
    int qe;
    cast_one<Mode>(t, scalar::float_bits(x[i]), s, first + i, r, qe, neg, over);
    rr[i] = r;
    qq[i] = qe;
    ng[i] = static_cast<uint8_t>(neg);
    clipped += over;
  }
  return clipped;
}

template <int Mode, int Bytes>
inline __attribute__((always_inline)) int64_t direct_codes_loop(const TileParams& t,
                                                                const CodeParams& c, const float* x,
                                                                int n, int s, uint64_t first,
                                                                void* codes) {
  // Copies: byte stores may alias t and c, and rereading them stops vectorization.
  const TileParams tl = t;
  const CodeParams cl = c;
  int64_t clipped = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t r, neg, over;
    int qe;
    cast_one<Mode>(tl, scalar::float_bits(x[i]), s, first + i, r, qe, neg, over);
    const int32_t code = encode_fast(cl, r, qe, neg);
    if constexpr (Bytes == 1)
      static_cast<uint8_t*>(codes)[i] = static_cast<uint8_t>(code);
    else
      static_cast<uint16_t*>(codes)[i] = static_cast<uint16_t>(code);
    clipped += over;
  }
  return clipped;
}

#define CASTSCOPE_CLONES __attribute__((target_clones("avx2", "default")))

template <int Bytes>
inline __attribute__((always_inline)) int64_t direct_codes(const TileParams& t, const CodeParams& c,
                                                           const float* x, int n, int s, uint64_t f,
                                                           void* codes) {
  switch (t.mode) {
    case 0:
      return direct_codes_loop<0, Bytes>(t, c, x, n, s, f, codes);
    case 1:
      return direct_codes_loop<1, Bytes>(t, c, x, n, s, f, codes);
    case 2:
      return direct_codes_loop<2, Bytes>(t, c, x, n, s, f, codes);
    default:
      return direct_codes_loop<3, Bytes>(t, c, x, n, s, f, codes);
  }
}

CASTSCOPE_CLONES int64_t codes_1byte(const TileParams& t, const CodeParams& c, const float* x,
                                     int n, int s, uint64_t f, void* codes) {
  return direct_codes<1>(t, c, x, n, s, f, codes);
}
CASTSCOPE_CLONES int64_t codes_2byte(const TileParams& t, const CodeParams& c, const float* x,
                                     int n, int s, uint64_t f, void* codes) {
  return direct_codes<2>(t, c, x, n, s, f, codes);
}

CASTSCOPE_CLONES int64_t values_even(const TileParams& t, const float* x, int n, int s, uint64_t f,
                                     float* v) {
  return values_loop<0>(t, x, n, s, f, v);
}
CASTSCOPE_CLONES int64_t values_away(const TileParams& t, const float* x, int n, int s, uint64_t f,
                                     float* v) {
  return values_loop<1>(t, x, n, s, f, v);
}
CASTSCOPE_CLONES int64_t values_zero(const TileParams& t, const float* x, int n, int s, uint64_t f,
                                     float* v) {
  return values_loop<2>(t, x, n, s, f, v);
}
CASTSCOPE_CLONES int64_t values_stochastic(const TileParams& t, const float* x, int n, int s,
                                           uint64_t f, float* v) {
  return values_loop<3>(t, x, n, s, f, v);
}

// bfloat16 of float32 input, round to nearest even, saturating: the rounding is one integer add
// on the bits (bfloat16 keeps float32's exponent range, so subnormals round the same way), the
// result past the largest finite value clips to it. Same bits as cast_one for finite input, at
// the cost of an integer add, a mask and a compare per element; `bad` says whether any input was
// NaN / Inf, which the caller gives to the generic path (one pass over the input, not a check
// and then the cast).
template <bool Codes>
inline __attribute__((always_inline)) int64_t bf16_loop(const float* x, int n, void* out,
                                                        uint32_t& bad) {
  int64_t clipped = 0;
  uint32_t nonfinite = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t u = scalar::float_bits(x[i]);
    nonfinite |= (u & 0x7FFFFFFFu) >= 0x7F800000u;
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    const uint32_t over = (r & 0x7FFFFFFFu) >= 0x7F800000u;
    r = over ? (u & 0x80000000u) | 0x7F7F0000u : r;
    if constexpr (Codes)
      static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(r >> 16);
    else
      static_cast<float*>(out)[i] = scalar::bits_float(r);
    clipped += over;
  }
  bad = nonfinite;
  return clipped;
}

CASTSCOPE_CLONES int64_t values_bf16(const float* x, int n, float* v, uint32_t& bad) {
  return bf16_loop<false>(x, n, v, bad);
}
CASTSCOPE_CLONES int64_t codes_bf16(const float* x, int n, uint16_t* c, uint32_t& bad) {
  return bf16_loop<true>(x, n, c, bad);
}

bool bf16_grid(const TileParams& t) {
  return t.mgrid == 7 && t.qmin == -133 && t.maxe == 120 && t.maxr == 255 && t.keep_negzero;
}

}  // namespace

CASTSCOPE_CLONES uint32_t abs_max_bits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = scalar::float_bits(x[i]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
  }
  return m;
}

CodeParams make_code_params(const scalar::Format& f, size_t bytes) {
  CodeParams c;
  if (bytes != 1 && bytes != 2) return c;
  if (f.kind == scalar::Kind::Float) {
    if (!usual_code_layout(f)) return c;
    c.kind = 0;
  } else if (f.kind == scalar::Kind::Int) {
    c.kind = 1;
  } else {
    return c;
  }
  c.base = f.mbits + f.bias - 1;
  c.mbits = f.mbits;
  c.sign_bit = f.bits - 1;
  c.bytes = static_cast<int>(bytes);
  return c;
}

int64_t cast_tile_codes(const TileParams& t, const CodeParams& c, const float* x, int n, int s,
                        uint64_t first_index, void* codes) {
  uint32_t bad;
  if (s == 0 && bf16_unscaled(t, c, true))
    return codes_bf16(x, n, static_cast<uint16_t*>(codes), bad);
  return c.bytes == 1 ? codes_1byte(t, c, x, n, s, first_index, codes)
                      : codes_2byte(t, c, x, n, s, first_index, codes);
}

bool bf16_unscaled(const TileParams& t, const CodeParams& c, bool codes) {
  return t.mode == 0 && bf16_grid(t) && (!codes || (c.bytes == 2 && c.kind == 0 && c.mbits == 7));
}

int64_t cast_bf16(const float* x, int n, float* values, uint16_t* codes, bool& nonfinite) {
  uint32_t bad;
  const int64_t clipped = values ? values_bf16(x, n, values, bad) : codes_bf16(x, n, codes, bad);
  nonfinite = bad != 0;
  return clipped;
}

int64_t cast_tile(const TileParams& t, const float* x, int n, int s, uint64_t first_index,
                  float* values, uint32_t* rr, int32_t* qq, uint8_t* neg) {
  if (values) {
    uint32_t bad;
    if (t.mode == 0 && s == 0 && bf16_grid(t)) return values_bf16(x, n, values, bad);
    switch (t.mode) {
      case 0:
        return values_even(t, x, n, s, first_index, values);
      case 1:
        return values_away(t, x, n, s, first_index, values);
      case 2:
        return values_zero(t, x, n, s, first_index, values);
      default:
        return values_stochastic(t, x, n, s, first_index, values);
    }
  }
  switch (t.mode) {
    case 0:
      return codes_loop<0>(t, x, n, s, first_index, rr, qq, neg);
    case 1:
      return codes_loop<1>(t, x, n, s, first_index, rr, qq, neg);
    case 2:
      return codes_loop<2>(t, x, n, s, first_index, rr, qq, neg);
    default:
      return codes_loop<3>(t, x, n, s, first_index, rr, qq, neg);
  }
}

}  // namespace castscope::cpu::fast
