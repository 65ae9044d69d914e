// ggml's reference quantizers for the block formats that gguf-py can also quantize (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4); the K-quants and IQ4 are in ggml_kquant.cpp. Every step
// is float32 as in ggml-quants.c and gguf-py: the scale is computed unrounded, its reciprocal
// multiplies the values, and only the stored scale is rounded to float16. Where ggml's C loop and
// gguf-py could differ (the signed maximum of a block of zeros), this follows gguf-py: the first
// element of largest magnitude.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "families/ggml/ggml_types.hpp"

namespace castscope::ggml {
namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = float_to_half(v);
  std::memcpy(p, &h, 2);
}

// The value of largest magnitude (first on ties), keeping its sign.
float signed_max(const float* x, int n) {
  int k = 0;
  for (int j = 1; j < n; ++j)
    if (std::fabs(x[j]) > std::fabs(x[k])) k = j;
  return x[k];
}
float abs_max(const float* x, int n) {
  float a = std::fabs(x[0]);
  for (int j = 1; j < n; ++j) a = std::max(a, std::fabs(x[j]));
  return a;
}
float recip(float d) {
  return d == 0.0f ? 0.0f : 1.0f / d;
}
// ggml's roundf (halves away from zero) as an integer. A block scale so small that its
// reciprocal overflows makes x / d infinite or NaN, where ggml's float-to-int conversion is
// undefined; such a code is taken as 0 (what x86's conversion leaves in the low byte).
int round_away(float v) {
  const float r = std::round(v);
  return std::fabs(r) <= 127.0f ? static_cast<int>(r) : 0;
}
int trunc_clip(float v, int hi) {
  const float t = std::trunc(v);
  if (!std::isfinite(t) || t <= 0.0f) return 0;  // the same undefined conversion as above
  return t >= static_cast<float>(hi) ? hi : static_cast<int>(t);
}

// Q4_0 / Q5_0: d = signed max / -2^(bits-1), so the largest magnitude maps to code 0 exactly.
void q_sym(const float* x, uint8_t* b, int bits) {
  const float half = static_cast<float>(1 << (bits - 1));
  const float d = signed_max(x, 32) / -half, id = recip(d);
  put_f16(b, d);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = trunc_clip(x[j] * id + (half + 0.5f), (1 << bits) - 1);
  uint8_t* qs = b + (bits == 4 ? 2 : 6);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
  if (bits == 5) {
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>(q[j] >> 4 & 1) << j;
    std::memcpy(b + 2, &qh, 4);
  }
}
// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), zero point m = min.
void q_affine(const float* x, uint8_t* b, int bits) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) {
    mn = std::min(mn, x[j]);
    mx = std::max(mx, x[j]);
  }
  const int top = (1 << bits) - 1;
  const float d = (mx - mn) / static_cast<float>(top), id = recip(d);
  put_f16(b, d);
  put_f16(b + 2, mn);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = trunc_clip((x[j] - mn) * id + 0.5f, top);
  uint8_t* qs = b + (bits == 4 ? 4 : 8);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
  if (bits == 5) {
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>(q[j] >> 4 & 1) << j;
    std::memcpy(b + 4, &qh, 4);
  }
}
void q8_0(const float* x, uint8_t* b) {
  const float d = abs_max(x, 32) / 127.0f, id = recip(d);
  put_f16(b, d);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(round_away(x[j] * id)));
}
// Ternary: d = max |x|, trit t = round(x / d) + 1 in {0, 1, 2}.
void trits(const float* x, int t[256], float* d) {
  *d = abs_max(x, 256);
  const float id = recip(*d);
  for (int e = 0; e < 256; ++e) t[e] = round_away(x[e] * id) + 1;
}
void tq1_0(const float* x, uint8_t* b) {
  int t[256];
  float d;
  trits(x, t, &d);
  static const int pow3[5] = {81, 27, 9, 3, 1};
  uint8_t v[52];
  // Five trits per byte as a base-3 number, the first trit most significant, stored as a
  // fixed-point fraction of 243 (rounded up) so the decoder extracts trits by multiplying.
  for (int l = 0; l < 32; ++l) {
    int s = 0;
    for (int p = 0; p < 5; ++p) s += t[p * 32 + l] * pow3[p];
    v[l] = static_cast<uint8_t>(s);
  }
  for (int l = 0; l < 16; ++l) {
    int s = 0;
    for (int p = 0; p < 5; ++p) s += t[160 + p * 16 + l] * pow3[p];
    v[32 + l] = static_cast<uint8_t>(s);
  }
  for (int l = 0; l < 4; ++l) {
    int s = 0;
    for (int p = 0; p < 4; ++p) s += t[240 + p * 4 + l] * pow3[p];
    v[48 + l] = static_cast<uint8_t>(s);
  }
  for (int i = 0; i < 52; ++i) b[i] = static_cast<uint8_t>((v[i] * 256 + 242) / 243);
  put_f16(b + 52, d);
}
void tq2_0(const float* x, uint8_t* b) {
  int t[256];
  float d;
  trits(x, t, &d);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      int v = 0;
      for (int s = 0; s < 4; ++s) v |= t[h * 128 + s * 32 + l] << (2 * s);
      b[h * 32 + l] = static_cast<uint8_t>(v);
    }
  put_f16(b + 64, d);
}

// ggml's E2M1 search (best_index_mxfp4): the first doubled-table entry of least |t * d - x|.
int e2m1_index(float x, float d) {
  static constexpr int8_t kT[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  int best = 0;
  float err = std::fabs(static_cast<float>(kT[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float e2 = std::fabs(static_cast<float>(kT[i]) * d - x);
    if (e2 < err) best = i, err = e2;
  }
  return best;
}
// MXFP4 (quantize_row_mxfp4_ref): e = floorf(log2f(amax)) - 2 + 127 in float32, which rounds up
// to the next power of two for an amax just below one (OCP MX takes the exact floor), and per
// element the first entry of ggml's doubled E2M1 table {0, 1, 2, 3, 4, 6, 8, 12, -0, -1, ...}
// whose |t * d - x| is least, d = 2^(e - 128): ties go to the entry of smaller magnitude and a
// negative value that rounds to zero gets +0 (0x0).
void mxfp4(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  // ggml converts the float to uint8_t; below 2^-125 the value is negative and x86 keeps the
  // low byte of the int32 conversion, as this does.
  const uint8_t e =
      amax > 0.0f
          ? static_cast<uint8_t>(static_cast<int>(std::floor(std::log2(amax)) - 2.0f + 127.0f))
          : 0;
  // ggml_e8m0_to_fp32_half: 2^(e - 128) (subnormal for e = 0 and 1).
  const float d = std::ldexp(1.0f, e - 128);
  b[0] = e;
  for (int j = 0; j < 16; ++j)
    b[1 + j] = static_cast<uint8_t>(e2m1_index(x[j], d) | e2m1_index(x[j + 16], d) << 4);
}

// ggml_fp32_to_ue4m3: amax / 6 to an unsigned E4M3 code, the first dropped mantissa bit
// rounding up (not to even), above 448 clipped, from 2^-6 down subnormal as
// trunc(x * 512 + 0.5) clipped to 7, and 0x7E where the exponent runs out.
uint8_t to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int e = static_cast<int>((bits >> 23) & 0xFF) - 127 + 7;
  if (e <= 0) {
    const int man = std::min(7, static_cast<int>(x * 512.0f + 0.5f));
    return man < 1 ? 0 : static_cast<uint8_t>(man);
  }
  if (e >= 15) return 0x7E;
  int man = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);
  if (man > 7) {
    man = 0;
    if (++e >= 15) return 0x7E;
  }
  return static_cast<uint8_t>((e << 3) | man);
}
// NVFP4 (quantize_row_nvfp4_ref): per 16 values a UE4M3 scale of max|x| / 6 and E2M1 codes
// against its value; element j of a 16 in the low nibble of byte j, j + 8 in the high one.
void nvfp4(const float* x, uint8_t* b) {
  for (int s = 0; s < 4; ++s) {
    const float* xb = x + 16 * s;
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(xb[j]));
    b[s] = to_ue4m3(amax / 6.0f);
    const float d = ue4m3_half(b[s]);
    for (int j = 0; j < 8; ++j)
      b[4 + 8 * s + j] = static_cast<uint8_t>(e2m1_index(xb[j], d) | e2m1_index(xb[j + 8], d) << 4);
  }
}
// Q1_0 (quantize_row_q1_0_ref): d = mean |x| of 128, one bit per value, set for x >= 0.
void q1_0(const float* x, uint8_t* b) {
  float sum = 0.0f;
  for (int j = 0; j < 128; ++j) sum += std::fabs(x[j]);
  put_f16(b, sum / 128);
  std::memset(b + 2, 0, 16);
  for (int j = 0; j < 128; ++j)
    if (x[j] >= 0.0f) b[2 + j / 8] |= static_cast<uint8_t>(1 << (j % 8));
}

// Byte offsets of the scale / zero-point halves of each type, set to NaN for a non-finite block.
void poison(uint32_t id, uint8_t* b, uint32_t bytes) {
  std::memset(b, 0, bytes);
  const float nan = std::nanf("");
  switch (id) {
    case 3:
    case 7:
      put_f16(b + 2, nan);
      [[fallthrough]];
    case 2:
    case 6:
    case 8:
      put_f16(b, nan);
      return;
    case 34:
      put_f16(b + 52, nan);
      return;
    case 39:  // E8M0's NaN; ggml has none and reads the block as zeros
      b[0] = 0xFF;
      return;
    case 40:  // E4M3's NaN; ggml reads it as a zero scale
      std::memset(b, 0x7F, 4);
      return;
    case 41:
      put_f16(b, nan);
      return;
    case 35:
      put_f16(b + 64, nan);
      return;
    case 12:
    case 13:
      put_f16(b, nan);
      put_f16(b + 2, nan);
      return;
    case 14:
      put_f16(b + 208, nan);
      return;
    case 10:
      put_f16(b + 80, nan);
      put_f16(b + 82, nan);
      return;
    case 11:
      put_f16(b + 108, nan);
      return;
    case 20:
    case 23:
      put_f16(b, nan);
      return;
  }
}

}  // namespace

// Q2_K ... Q6_K, IQ4_NL, IQ4_XS (ggml_kquant.cpp); `qw` the block's importance weights or null.
void quantize_k(uint32_t id, const float* x, uint8_t* block, const float* qw);
void quantize_legacy_weighted(uint32_t id, const float* xb, const float* weight, uint8_t* b);

// The types with a quantizer here, and those of them that take importance weights.
constexpr uint32_t kQuantized[] = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 34, 35, 39, 40, 41};
constexpr uint32_t kWeighted[] = {2, 3, 6, 7, 10, 11, 12, 13, 14, 20, 23};

bool can_quantize(uint32_t id) {
  return std::find(std::begin(kQuantized), std::end(kQuantized), id) != std::end(kQuantized);
}

bool takes_importance(uint32_t id) {
  return std::find(std::begin(kWeighted), std::end(kWeighted), id) != std::end(kWeighted);
}

void quantize(uint32_t id, const float* x, uint64_t n, uint8_t* out, const float* qw) {
  const TypeInfo& t = *type_info(id);
  // Q8_0, MXFP4 and the ternary types take no importance (ggml ignores it for them too).
  const bool legacy = id == 2 || id == 3 || id == 6 || id == 7;
  const bool weighted = qw && takes_importance(id);
  // The legacy types' sigma2 is the mean square of the whole row (non-finite values left out,
  // where ggml's is undefined).
  float sigma2 = 0;
  if (weighted && legacy) {
    float s = 0;
    for (uint64_t j = 0; j < n; ++j)
      if (std::isfinite(x[j])) s += x[j] * x[j];
    sigma2 = s / static_cast<float>(n);
  }
  for (uint64_t i = 0; i < n / t.block; ++i) {
    const float* xb = x + i * t.block;
    uint8_t* b = out + i * t.block_bytes;
    if (!std::all_of(xb, xb + t.block, [](float v) { return std::isfinite(v); })) {
      poison(id, b, t.block_bytes);
      continue;
    }
    if (weighted && legacy) {
      float w[32];
      const float* q = qw + i * t.block;
      for (int j = 0; j < 32; ++j) w[j] = q[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
      quantize_legacy_weighted(id, xb, w, b);
      continue;
    }
    switch (id) {
      case 2:
        q_sym(xb, b, 4);
        break;
      case 6:
        q_sym(xb, b, 5);
        break;
      case 3:
        q_affine(xb, b, 4);
        break;
      case 7:
        q_affine(xb, b, 5);
        break;
      case 8:
        q8_0(xb, b);
        break;
      case 34:
        tq1_0(xb, b);
        break;
      case 35:
        tq2_0(xb, b);
        break;
      case 39:
        mxfp4(xb, b);
        break;
      case 40:
        nvfp4(xb, b);
        break;
      case 41:
        q1_0(xb, b);
        break;
      default:
        quantize_k(id, xb, b, weighted ? qw + i * t.block : nullptr);
        break;
    }
  }
}

}  // namespace castscope::ggml
