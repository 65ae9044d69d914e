// Decoders of ggml's block formats. Layouts are ggml's (ggml-common.h); the arithmetic mirrors
// gguf-py's dequantize_blocks step by step in float32 (products formed in the same order, no
// fused multiply-add), because a different but mathematically equal order can round
// differently. QK_K super-blocks hold 256 elements.
#include "families/ggml/ggml_types.hpp"

#include <cmath>
#include <cstring>
#include <vector>

namespace castscope::ggml {
namespace {

constexpr int QK_K = 256;

// A lookup grid of the IQ formats: `rows` rows of `width` values, stored as one hex digit per
// element indexing `values`.
struct GridSpec {
  int rows, width;
  float values[8];
  int n_values;
  const char* digits;
};
#include "families/ggml/ggml_grids.inc"

struct Grid {
  std::vector<float> v;
  explicit Grid(const GridSpec& g) : v(static_cast<size_t>(g.rows) * g.width) {
    for (size_t i = 0; i < v.size(); ++i) {
      const char c = g.digits[i];
      v[i] = g.values[c <= '9' ? c - '0' : c - 'a' + 10];
    }
  }
  const float* row(uint32_t r, int width) const { return v.data() + size_t{r} * width; }
};
const Grid& grid(const GridSpec& g) {
  // One decoded copy per grid, built on first use (thread-safe static initialisation).
  static const Grid g2xxs(kIq2xxsGrid), g2xs(kIq2xsGrid), g2s(kIq2sGrid), g3xxs(kIq3xxsGrid),
      g3s(kIq3sGrid), g1s(kIq1sGrid);
  if (&g == &kIq2xxsGrid) return g2xxs;
  if (&g == &kIq2xsGrid) return g2xs;
  if (&g == &kIq2sGrid) return g2s;
  if (&g == &kIq3xxsGrid) return g3xxs;
  if (&g == &kIq3sGrid) return g3s;
  return g1s;
}

// ggml's 7-bit sign index: the eighth sign makes the count of negative signs even.
uint8_t ksigns(uint32_t i) {
  return static_cast<uint8_t>(i | ((__builtin_popcount(i) & 1u) << 7));
}

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}
uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float sign(const uint8_t bits, int j) {
  return (bits >> j) & 1 ? -1.0f : 1.0f;
}

constexpr int8_t kE2M1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

// Element j of a 32-element block whose 16 bytes hold element j in the low nibble of byte j and
// element j + 16 in its high nibble.
uint8_t nib32(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
}

void q4_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(nib32(b + 2, j) - 8);
}
void q4_1(const uint8_t* b, float* y) {
  const float d = f16(b), m = f16(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(nib32(b + 4, j)) + m;
}
void q5_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  const uint32_t qh = u32(b + 2);
  for (int j = 0; j < 32; ++j)
    y[j] = d * static_cast<float>(static_cast<int>(nib32(b + 6, j) | (qh >> j & 1) << 4) - 16);
}
void q5_1(const uint8_t* b, float* y) {
  const float d = f16(b), m = f16(b + 2);
  const uint32_t qh = u32(b + 4);
  for (int j = 0; j < 32; ++j)
    y[j] = d * static_cast<float>(nib32(b + 8, j) | ((qh >> j & 1) << 4)) + m;
}
void q8_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}
void mxfp4(const uint8_t* b, float* y) {
  // ggml's table holds twice the E2M1 values, so the E8M0 scale is halved: 2^(e - 128).
  const float d = std::ldexp(1.0f, b[0] - 128);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(kE2M1x2[nib32(b + 1, j)]);
}
}  // namespace

float ue4m3_half(uint8_t x) {
  // NVFP4's block scale, halved like MXFP4's for the doubled E2M1 table; 0x7F (NaN in E4M3)
  // decodes to 0 and the sign bit is ignored, as gguf-py does.
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF, man = x & 7;
  const float raw = exp == 0 ? static_cast<float>(man) * 0x1p-9f
                             : (1.0f + static_cast<float>(man) / 8.0f) * std::ldexp(1.0f, exp - 7);
  return raw * 0.5f;
}

namespace {

// Q1_0 (dequantize_row_q1_0): 128 signs, bit set for +d, clear for -d.
void q1_0(const uint8_t* b, float* y) {
  const float d = f16(b), neg = -d;
  for (int j = 0; j < 128; ++j) y[j] = (b[2 + j / 8] >> (j % 8) & 1) ? d : neg;
}
void nvfp4(const uint8_t* b, float* y) {  // 64 elements: 4 scale bytes, 4 x 8 bytes of codes
  for (int s = 0; s < 4; ++s) {
    const float d = ue4m3_half(b[s]);
    const uint8_t* qs = b + 4 + 8 * s;
    for (int j = 0; j < 8; ++j) {
      y[16 * s + j] = d * static_cast<float>(kE2M1x2[qs[j] & 0xF]);
      y[16 * s + 8 + j] = d * static_cast<float>(kE2M1x2[qs[j] >> 4]);
    }
  }
}
void iq4_nl(const uint8_t* b, float* y) {
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(kIq4nl[nib32(b + 2, j)]);
}

void q2_k(const uint8_t* b, float* y) {  // scales[16], qs[64], d, dmin
  const uint8_t *sc = b, *qs = b + 16;
  const float d = f16(b + 80), dmin = f16(b + 82);
  for (int e = 0; e < QK_K; ++e) {
    const int h = e / 128, s = e % 128 / 32, l = e % 32, g = e / 16;
    const float dl = d * static_cast<float>(sc[g] & 0xF),
                ml = dmin * static_cast<float>(sc[g] >> 4);
    y[e] = dl * static_cast<float>(qs[32 * h + l] >> (2 * s) & 3) - ml;
  }
}
void q3_k(const uint8_t* b, float* y) {  // hmask[32], qs[64], scales[12], d
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  const float d = f16(b + 108);
  float dl[16];
  for (int k = 0; k < 16; ++k) {
    const int lo = sc[k % 8] >> (4 * (k / 8)) & 0xF, hi = sc[8 + k % 4] >> (2 * (k / 4)) & 3;
    dl[k] = d * static_cast<float>(static_cast<int8_t>(lo | hi << 4) - 32);
  }
  for (int e = 0; e < QK_K; ++e) {
    const int h = e / 128, s = e % 128 / 32, l = e % 32;
    const int ql = qs[32 * h + l] >> (2 * s) & 3, qh = (hm[l] >> (e / 32) & 1) ^ 1;
    y[e] = dl[e / 16] * static_cast<float>(ql - (qh << 2));
  }
}
// The 6-bit scales and mins of Q4_K and Q5_K, packed in 12 bytes.
void scale_min_k4(const uint8_t* s, float d, float dmin, float* dd, float* dm) {
  for (int j = 0; j < 8; ++j) {
    const int sc = j < 4 ? s[j] & 0x3F : (s[j + 4] & 0xF) | ((s[j - 4] >> 2) & 0x30);
    const int mn = j < 4 ? s[j + 4] & 0x3F : (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
    dd[j] = d * static_cast<float>(sc);
    dm[j] = dmin * static_cast<float>(mn);
  }
}
void q4_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qs[128]
  float dd[8], dm[8];
  scale_min_k4(b + 4, f16(b), f16(b + 2), dd, dm);
  const uint8_t* qs = b + 16;
  for (int e = 0; e < QK_K; ++e) {
    const int q = qs[32 * (e / 64) + e % 32] >> (4 * (e % 64 / 32)) & 0xF;
    y[e] = dd[e / 32] * static_cast<float>(q) - dm[e / 32];
  }
}
void q5_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  float dd[8], dm[8];
  scale_min_k4(b + 4, f16(b), f16(b + 2), dd, dm);
  const uint8_t *qh = b + 16, *qs = b + 48;
  for (int e = 0; e < QK_K; ++e) {
    const int ql = qs[32 * (e / 64) + e % 32] >> (4 * (e % 64 / 32)) & 0xF;
    const int q = ql | (qh[e % 32] >> (e / 32) & 1) << 4;
    y[e] = dd[e / 32] * static_cast<float>(q) - dm[e / 32];
  }
}
void q6_k(const uint8_t* b, float* y) {  // ql[128], qh[64], scales[16] (int8), d
  const uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
  const float d = f16(b + 208);
  for (int e = 0; e < QK_K; ++e) {
    const int h = e / 128, r = e % 128;
    const int lo = ql[64 * h + r % 64] >> (4 * (r / 64)) & 0xF;
    const int hi = qh[32 * h + r % 32] >> (2 * (r / 32)) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(sc[e / 16]));
    y[e] = dl * static_cast<float>(static_cast<int8_t>(lo | hi << 4) - 32);
  }
}
void tq1_0(const uint8_t* b, float* y) {  // qs[48] (5 trits a byte), qh[4] (4 a byte), d
  static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
  const float d = f16(b + 52);
  for (int e = 0; e < QK_K; ++e) {
    uint8_t v;  // the trit is the top of the byte's fixed-point fraction after the shift
    if (e < 160)
      v = static_cast<uint8_t>(b[e % 32] * pow3[e / 32]);
    else if (e < 240)
      v = static_cast<uint8_t>(b[32 + (e - 160) % 16] * pow3[(e - 160) / 16]);
    else
      v = static_cast<uint8_t>(b[48 + (e - 240) % 4] * pow3[(e - 240) / 4]);
    y[e] = d * static_cast<float>(((uint16_t{v} * 3) >> 8) - 1);
  }
}
void tq2_0(const uint8_t* b, float* y) {  // qs[64], d
  const float d = f16(b + 64);
  for (int e = 0; e < QK_K; ++e)
    y[e] = d * static_cast<float>((b[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3) - 1);
}

void iq2_xxs(const uint8_t* b, float* y) {  // d, 8 x (4 grid bytes, u32 signs + scale)
  const float d = f16(b);
  const Grid& g = grid(kIq2xxsGrid);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* q = b + 2 + 8 * ib;
    const uint32_t aux = u32(q + 4);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const float* row = g.row(q[l], 8);
      const uint8_t s = ksigns(aux >> (7 * l) & 0x7F);
      for (int j = 0; j < 8; ++j) y[32 * ib + 8 * l + j] = db * row[j] * sign(s, j);
    }
  }
}
void iq2_xs(const uint8_t* b, float* y) {  // d, qs u16[32], scales[8]
  const float d = f16(b);
  const Grid& g = grid(kIq2xsGrid);
  for (int t = 0; t < 32; ++t) {
    const uint16_t q = u16(b + 2 + 2 * t);
    const int k = t / 2;
    const float db = d * (0.5f + static_cast<float>(b[66 + k / 2] >> (4 * (k % 2)) & 0xF)) * 0.25f;
    const float* row = g.row(q & 511, 8);
    const uint8_t s = ksigns(q >> 9);
    for (int j = 0; j < 8; ++j) y[8 * t + j] = db * row[j] * sign(s, j);
  }
}
void iq2_s(const uint8_t* b, float* y) {  // d, qs[32], signs[32], qh[8], scales[8]
  const float d = f16(b);
  const uint8_t *qs = b + 2, *sg = b + 34, *qh = b + 66, *sc = b + 74;
  const Grid& g = grid(kIq2sGrid);
  for (int t = 0; t < 32; ++t) {
    const int k = t / 2;
    const float db = d * (0.5f + static_cast<float>(sc[k / 2] >> (4 * (k % 2)) & 0xF)) * 0.25f;
    const float* row = g.row(qs[t] | (qh[t / 4] >> (2 * (t % 4)) & 3) << 8, 8);
    for (int j = 0; j < 8; ++j) y[8 * t + j] = db * row[j] * sign(sg[t], j);
  }
}
void iq3_xxs(const uint8_t* b, float* y) {  // d, qs[64], u32[8] signs + scale
  const float d = f16(b);
  const uint8_t* qs = b + 2;
  const Grid& g = grid(kIq3xxsGrid);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = u32(b + 66 + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t s = ksigns(aux >> (7 * l) & 0x7F);
      for (int j = 0; j < 8; ++j) {
        const float* row = g.row(qs[8 * ib + 2 * l + j / 4], 4);
        y[32 * ib + 8 * l + j] = db * row[j % 4] * sign(s, j);
      }
    }
  }
}
void iq3_s(const uint8_t* b, float* y) {  // d, qs[64], qh[8], signs[32], scales[4]
  const float d = f16(b);
  const uint8_t *qs = b + 2, *qh = b + 66, *sg = b + 74, *sc = b + 106;
  const Grid& g = grid(kIq3sGrid);
  for (int e = 0; e < QK_K; ++e) {
    const int k = e / 32, t = e / 4;
    const float db = d * static_cast<float>(1 + 2 * (sc[k / 2] >> (4 * (k % 2)) & 0xF));
    const float* row = g.row(qs[t] | (qh[t / 8] >> (t % 8) & 1) << 8, 4);
    y[e] = db * row[e % 4] * sign(sg[e / 8], e % 8);
  }
}
void iq1_s(const uint8_t* b, float* y) {  // d, qs[32], qh u16[8]
  const float d = f16(b);
  const Grid& g = grid(kIq1sGrid);
  for (int i = 0; i < 8; ++i) {
    const uint16_t qh = u16(b + 34 + 2 * i);
    const float dl = d * static_cast<float>(2 * (qh >> 12 & 7) + 1);
    const float delta = qh & 0x8000 ? -0.125f : 0.125f;
    for (int s = 0; s < 4; ++s) {
      const float* row = g.row(b[2 + 4 * i + s] | (qh >> (3 * s) & 7) << 8, 8);
      for (int j = 0; j < 8; ++j) y[32 * i + 8 * s + j] = dl * (row[j] + delta);
    }
  }
}
void iq1_m(const uint8_t* b, float* y) {  // qs[32], qh[16], scales u16[4] (with d's nibbles)
  const uint8_t *qs = b, *qh = b + 32;
  uint16_t sc[4];
  for (int i = 0; i < 4; ++i) sc[i] = u16(b + 48 + 2 * i);
  const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | (sc[1] >> 8 & 0xF0) |
                                               (sc[2] >> 4 & 0xF00) | (sc[3] & 0xF000));
  const float d = half_to_float(dbits);
  const Grid& g = grid(kIq1sGrid);
  for (int t = 0; t < 32; ++t) {
    const int k = t / 2, v = qh[t / 2] >> (4 * (t % 2)) & 0xF;
    const float dl = d * static_cast<float>(2 * (sc[k / 4] >> (3 * (k % 4)) & 7) + 1);
    const float delta = v & 8 ? -0.125f : 0.125f;
    const float* row = g.row(qs[t] | (v & 7) << 8, 8);
    for (int j = 0; j < 8; ++j) y[8 * t + j] = dl * (row[j] + delta);
  }
}
void iq4_xs(const uint8_t* b, float* y) {  // d, scales_h u16, scales_l[4], qs[128]
  const float d = f16(b);
  const uint16_t sh = u16(b + 2);
  const uint8_t *sl = b + 4, *qs = b + 8;
  for (int c = 0; c < 8; ++c) {
    const int lo = sl[c / 2] >> (4 * (c % 2)) & 0xF, hi = sh >> (2 * c) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(lo | hi << 4) - 32);
    for (int j = 0; j < 32; ++j)
      y[32 * c + j] = dl * static_cast<float>(kIq4nl[nib32(qs + 16 * c, j)]);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);
struct Entry {
  TypeInfo info;
  BlockFn fn;
};
// ggml's type ids (ggml.h, enum ggml_type) with their block geometry (GGML_QUANT_SIZES).
const Entry kTable[] = {
    {{0, "F32", 1, 4, true}, nullptr},         {{1, "F16", 1, 2, true}, nullptr},
    {{2, "Q4_0", 32, 18, true}, q4_0},         {{3, "Q4_1", 32, 20, true}, q4_1},
    {{6, "Q5_0", 32, 22, true}, q5_0},         {{7, "Q5_1", 32, 24, true}, q5_1},
    {{8, "Q8_0", 32, 34, true}, q8_0},         {{9, "Q8_1", 32, 36, false}, nullptr},
    {{10, "Q2_K", 256, 84, true}, q2_k},       {{11, "Q3_K", 256, 110, true}, q3_k},
    {{12, "Q4_K", 256, 144, true}, q4_k},      {{13, "Q5_K", 256, 176, true}, q5_k},
    {{14, "Q6_K", 256, 210, true}, q6_k},      {{15, "Q8_K", 256, 292, false}, nullptr},
    {{16, "IQ2_XXS", 256, 66, true}, iq2_xxs}, {{17, "IQ2_XS", 256, 74, true}, iq2_xs},
    {{18, "IQ3_XXS", 256, 98, true}, iq3_xxs}, {{19, "IQ1_S", 256, 50, true}, iq1_s},
    {{20, "IQ4_NL", 32, 18, true}, iq4_nl},    {{21, "IQ3_S", 256, 110, true}, iq3_s},
    {{22, "IQ2_S", 256, 82, true}, iq2_s},     {{23, "IQ4_XS", 256, 136, true}, iq4_xs},
    {{24, "I8", 1, 1, true}, nullptr},         {{25, "I16", 1, 2, true}, nullptr},
    {{26, "I32", 1, 4, true}, nullptr},        {{27, "I64", 1, 8, true}, nullptr},
    {{28, "F64", 1, 8, true}, nullptr},        {{29, "IQ1_M", 256, 56, true}, iq1_m},
    {{30, "BF16", 1, 2, true}, nullptr},       {{34, "TQ1_0", 256, 54, true}, tq1_0},
    {{35, "TQ2_0", 256, 66, true}, tq2_0},     {{39, "MXFP4", 32, 17, true}, mxfp4},
    {{40, "NVFP4", 64, 36, true}, nvfp4},      {{41, "Q1_0", 128, 18, true}, q1_0},
};

const Entry* entry(uint32_t id) {
  for (const Entry& e : kTable)
    if (e.info.id == id) return &e;
  return nullptr;
}

}  // namespace

const TypeInfo* type_info(uint32_t id) {
  const Entry* e = entry(id);
  return e ? &e->info : nullptr;
}

const TypeInfo* type_by_name(const std::string& name) {
  for (const Entry& e : kTable)
    if (name == e.info.name) return &e.info;
  return nullptr;
}

std::optional<DType> plain_dtype(uint32_t id) {
  switch (id) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 30:
      return DType::BF16;
    case 28:
      return DType::F64;
    case 24:
      return DType::I8;
    case 25:
      return DType::I16;
    case 26:
      return DType::I32;
    case 27:
      return DType::I64;
    default:
      return std::nullopt;
  }
}

uint64_t row_bytes(const TypeInfo& t, uint64_t n) {
  return n / t.block * t.block_bytes;
}

void dequantize(uint32_t id, const uint8_t* src, uint64_t n, float* out) {
  const Entry* e = entry(id);
  const TypeInfo& t = e->info;
  for (uint64_t i = 0; i < n / t.block; ++i) e->fn(src + i * t.block_bytes, out + i * t.block);
}

}  // namespace castscope::ggml
