// ggml's quantizers of IQ4_NL / IQ4_XS and of the K-quants Q2_K ... Q6_K, as llama.cpp's model
// quantizer (llama_model_quantize -> ggml_quantize_chunk -> quantize_<type>) runs them without an
// importance matrix. For the K-quants and IQ4_XS that is quantize_row_*_ref in ggml-quants.c; for
// IQ4_NL it is quantize_iq4_nl, which searches 15 candidate scales where the _ref searches none.
// K-quants: per 32 values (Q6_K: 16) a scale (and minimum) found by ggml's search, then the
// sub-block scales quantized to 6 (Q6_K: 8) bits against the super-block's fp16 d (and dmin) and
// the codes chosen again against the quantized scales. Every sum runs in ggml's order in float32
// so the searches take the same branches.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "families/ggml/ggml_types.hpp"

namespace castscope::ggml {
namespace {

constexpr int QK_K = 256;
constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int, bit for bit: ties to even for |v| < 2^22 (the only range it is meant for;
// outside it the same bits come out as in ggml).
int nearest(float v) {
  const float val = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}
int clampi(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// make_qkx2_quants: the scale and (negated) minimum of one sub-block with weights, searched over
// nstep + 1 candidate ranges; L receives the codes.
float qkx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min, float rmin,
           float rdelta, int nstep, bool use_mad = false) {
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -mn;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (mx - mn), scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clampi(nearest(iscale * (x[i] - mn)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + mn - x[i];
    best += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clampi(nearest(iscale * (x[i] - mn)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(aux[i]) + this_min - x[i];
        cur += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
      }
      if (cur < best) {
        std::memcpy(L, aux, static_cast<size_t>(n));
        best = cur;
        scale = this_scale;
        mn = this_min;
      }
    }
  }
  *the_min = -mn;
  return scale;
}

// The 2-bit codes of Q2_K and Q3_K: four per byte, from elements 32 apart.
void pack2(const int8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

// Q2_K: 16 sub-blocks of 16, scale and minimum by ggml's search with absolute errors, both
// quantized to 4 bits against fp16 d = max scale / 15 and dmin = max minimum / 15.
void q2_k(const float* x, uint8_t* b) {
  uint8_t L[QK_K], *sc = b;
  float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
    scales[j] = qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  uint16_t dh = 0, mh = 0;
  std::memset(sc, 0, 16);
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(nearest(iscale * scales[j]));
    dh = float_to_half(max_scale / 15.f);
  }
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int j = 0; j < 16; ++j) sc[j] |= static_cast<uint8_t>(nearest(iscale * mins[j]) << 4);
    mh = float_to_half(max_min / 15.f);
  }
  std::memcpy(b + 80, &dh, 2);
  std::memcpy(b + 82, &mh, 2);
  for (int j = 0; j < 16; ++j) {
    const float d = half_to_float(dh) * static_cast<float>(sc[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = half_to_float(mh) * static_cast<float>(sc[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(clampi(nearest((x[16 * j + i] + dm) / d), 0, 3));
  }
  int8_t Ls[QK_K];
  for (int i = 0; i < QK_K; ++i) Ls[i] = static_cast<int8_t>(L[i]);
  pack2(Ls, b + 16);
}

// make_q3_quants with its rmse refinement: the signed scale of 16 values, codes in [-4, 3].
float q3(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 4;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampi(nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i], fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i], li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int nl = clampi(nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (nl != L[i]) {
          const float fl = static_cast<float>(nl);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q3_K: 16 sub-blocks of 16 with 6-bit signed scales against fp16 d = -max / 32; codes in
// [-4, 3] stored as 2 low bits plus a high bit in hmask (set when the code is >= 0).
void q3_k(const float* x, uint8_t* b) {
  int8_t L[QK_K];
  float scales[16], max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = q3(x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > amax) amax = std::fabs(scales[j]), max_scale = scales[j];
  }
  uint8_t* sc = b + 96;
  std::memset(sc, 0, 12);
  uint16_t dh = 0;
  if (max_scale != 0) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int l = static_cast<int8_t>(nearest(iscale * scales[j]));
      l = clampi(l, -32, 31) + 32;
      if (j < 8)
        sc[j] = static_cast<uint8_t>(l & 0xF);
      else
        sc[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      sc[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    dh = float_to_half(1 / iscale);
  }
  std::memcpy(b + 108, &dh, 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    const int s = (lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    const float d = half_to_float(dh) * static_cast<float>(s);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clampi(nearest(x[16 * j + i] / d), -4, 3) + 4);
  }
  uint8_t* hmask = b;
  std::memset(hmask, 0, 32);
  for (int j = 0; j < QK_K; ++j)
    if (L[j] > 3) {
      hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
      L[j] = static_cast<int8_t>(L[j] - 4);
    }
  pack2(L, b + 32);
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and minimums.
void q45_k(const float* x, uint8_t* b, int nmax) {
  uint8_t L[QK_K];
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = nmax == 15 ? qkx2(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20)
                           : qkx2(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* sc = b + 4;
  std::memset(sc, 0, 12);
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest(inv_scale * scales[j]) & 0xFF));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest(inv_min * mins[j]) & 0xFF));
    if (j < 4) {
      sc[j] = ls[j];
      sc[j + 4] = lm[j];
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  const uint16_t dh = float_to_half(max_scale / 63.f), mh = float_to_half(max_min / 63.f);
  std::memcpy(b, &dh, 2);
  std::memcpy(b + 2, &mh, 2);
  for (int j = 0; j < 8; ++j) {
    const float d = half_to_float(dh) * static_cast<float>(ls[j]);
    if (d == 0.0f) continue;
    const float dm = half_to_float(mh) * static_cast<float>(lm[j]);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(clampi(nearest((x[32 * j + i] + dm) / d), 0, nmax));
  }
  if (nmax == 15) {
    uint8_t* q = b + 16;
    for (int j = 0; j < QK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    return;
  }
  uint8_t *qh = b + 16, *ql = b + 48;
  std::memset(qh, 0, 32);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < QK_K; n += 64, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) l1 -= 16, qh[j] |= m1;
      if (l2 > 15) l2 -= 16, qh[j] |= m2;
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
}

// make_qx_quants with rmse_type 1 (weights x^2): the signed scale of 16 values, nmax 32.
float qx(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -static_cast<float>(nmax) / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampi(nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i], fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float fl = static_cast<float>(clampi(nearest(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clampi(nearest(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void q6_k(const float* x, uint8_t* b) {  // ql[128], qh[64], scales[16] (int8), d
  int8_t L[QK_K];
  float scales[16], max_scale = 0, max_abs = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = qx(x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs) max_abs = std::fabs(scales[ib]), max_scale = scales[ib];
  }
  std::memset(b, 0, 210);
  if (max_abs < kGroupMaxEps) return;  // d = +0, all codes 0
  const float iscale = -128.f / max_scale;
  const uint16_t dh = float_to_half(1 / iscale);
  std::memcpy(b + 208, &dh, 2);
  int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int ib = 0; ib < 16; ++ib)
    sc[ib] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = half_to_float(dh) * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clampi(nearest(x[16 * j + i] / d), -32, 31) + 32);
  }
  uint8_t *ql = b, *qh = b + 128;
  for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF,
                q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
}

constexpr int8_t kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};

// best_index_int8: the nearest table entry, the upper one on a tie.
int iq4_index(float x) {
  if (x <= kIq4[0]) return 0;
  if (x >= kIq4[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < kIq4[mav])
      mu = mav;
    else
      ml = mav;
  }
  return x - kIq4[mu - 1] < kIq4[mu] - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_impl without importance weights and with ntry = 7 (quantize_iq4_nl and
// quantize_iq4_xs): per 32 values the codes picked at d = max / -127 and their least-squares
// scale (weights x^2), refined over 15 candidate scales. IQ4_NL (one block of 32) picks the codes
// again for the stored scale; IQ4_XS quantizes the 8 scales to 6 bits against fp16
// d = -max scale / 32 and picks the codes again for each.
void iq4(const float* x, uint8_t* b, int sbs) {
  constexpr int ntry = 7;
  float scales[8];
  uint8_t L[QK_K];
  const bool xs = sbs == QK_K;
  uint8_t* q4 = b + (xs ? 8 : 2);
  std::memset(q4, 0, static_cast<size_t>(sbs / 2));
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < sbs / 32; ++ib) {
    const float* xb = x + 32 * ib;
    uint8_t* Lb = L + 32 * ib;
    float w[32], amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) w[j] = xb[j] * xb[j];
    for (int j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = -max / kIq4[0], id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = iq4_index(id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = kIq4[l];
      sumqx += w[j] * q * xb[j];
      sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = static_cast<float>(itry + kIq4[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const float q = kIq4[iq4_index(id * xb[j])];
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    if (std::fabs(d) > amax_scale) amax_scale = std::fabs(d), max_scale = d;
  }
  if (!xs) {
    const uint16_t dh = float_to_half(scales[0]);
    std::memcpy(b, &dh, 2);
    // The codes for the unrounded least-squares scale (an all-zero block: code 8, value 1).
    const float id = scales[0] != 0 ? 1 / scales[0] : 0.f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(iq4_index(id * x[j]));
  } else {
    const float d = -max_scale / 32, id = d != 0 ? 1 / d : 0.f;
    const uint16_t dh = float_to_half(d);
    std::memcpy(b, &dh, 2);
    uint16_t sh = 0;
    uint8_t* sl = b + 4;
    for (int ib = 0; ib < 8; ++ib) {
      int l = clampi(nearest(id * scales[ib]), -32, 31);
      const float dl = d * static_cast<float>(l), idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j)
        L[32 * ib + j] = static_cast<uint8_t>(iq4_index(idl * x[32 * ib + j]));
      l += 32;
      if (ib % 2 == 0)
        sl[ib / 2] = static_cast<uint8_t>(l & 0xF);
      else
        sl[ib / 2] |= static_cast<uint8_t>((l & 0xF) << 4);
      sh |= static_cast<uint16_t>((l >> 4) << (2 * ib));
    }
    std::memcpy(b + 2, &sh, 2);
  }
  for (int i = 0; i < sbs / 32; ++i)
    for (int j = 0; j < 16; ++j)
      q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_k(uint32_t id, const float* x, uint8_t* b) {
  if (id == 10)
    q2_k(x, b);
  else if (id == 11)
    q3_k(x, b);
  else if (id == 12)
    q45_k(x, b, 15);
  else if (id == 13)
    q45_k(x, b, 31);
  else if (id == 14)
    q6_k(x, b);
  else if (id == 20)
    iq4(x, b, 32);
  else
    iq4(x, b, QK_K);
}

}  // namespace castscope::ggml
