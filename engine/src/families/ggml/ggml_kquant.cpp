// ggml's quantizers of IQ4_NL / IQ4_XS and of the K-quants Q2_K ... Q6_K, as llama.cpp's model
// quantizer (llama_model_quantize -> ggml_quantize_chunk -> quantize_<type>) runs them. Without
// an importance matrix that is quantize_row_*_ref in ggml-quants.c for the K-quants and IQ4_XS,
// and quantize_iq4_nl for IQ4_NL (15 candidate scales where the _ref searches none). With one
// (`qw`, the importance of each element of the block) it is quantize_row_*_impl: the element
// weights become qw * sqrt(sigma2 + x^2), and the K-quants then search more candidate ranges
// (make_qkx3_quants) and fit the sub-block scales by weighted least squares (make_qp_quants /
// make_qx_quants) instead of scaling them by their maximum.
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

// make_qx_quants with rmse_type 1: the signed scale of n values with codes l + nmax in
// [0, 2 nmax), weights x^2 or, given, qw.
float qx(int n, int nmax, const float* x, int8_t* L, const float* qw) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  auto wt = [&](int i) { return qw ? qw[i] : x[i] * x[i]; };
  float iscale = -static_cast<float>(nmax) / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampi(nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = wt(i), fl = static_cast<float>(l);
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
      const float w = wt(i);
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

// make_qp_quants: the positive scale of n non-negative values (sub-block scales or minimums)
// with codes in [0, nmax], fitted to the weights qw. Codes are stored as ggml's uint8_t, so a
// negative rounding wraps there as here.
float qp(int n, int nmax, const float* x, uint8_t* L, const float* qw) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest(iscale * x[i]));
  const float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best += qw[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += qw[i] * diff * diff;
    }
    if (mse < best) best = mse, iscale = iscale_is;
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::min(nmax, nearest(iscale * x[i])));
    const float w = qw[i], fl = static_cast<float>(L[i]);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = qw[i], li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li, sl2 = suml2 - w * li * li;
      if (slx > 0 && sl2 > 0) {
        const int nl = std::min(nmax, nearest(x[i] * sl2 / slx));
        if (nl != L[i]) {
          const float fl = static_cast<float>(nl);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// sigma2 of quantize_row_*_impl: `k` times the mean square of the n values.
float mean_sq(const float* x, int n, float k) {
  float s = 0;
  for (int j = 0; j < n; ++j) s += x[j] * x[j];
  return k * s / static_cast<float>(n);
}
// The element weights of quantize_row_*_impl: qw * sqrt(sigma2 + x^2); returns their sum (in
// index order), the sub-block's weight when its scale is quantized.
float impl_weights(const float* x, const float* qw, int n, float sigma2, float* w) {
  float sum = 0;
  for (int l = 0; l < n; ++l) w[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
  for (int l = 0; l < n; ++l) sum += w[l];
  return sum;
}

// The 2-bit codes of Q2_K and Q3_K: four per byte, from elements 32 apart.
void pack2(const int8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

// Q2_K: 16 sub-blocks of 16, scale and minimum by ggml's search with absolute errors, both
// quantized to 4 bits against fp16 d = max scale / 15 and dmin = max minimum / 15. With
// importance weights: the weighted search of squared errors, and d, dmin fitted by make_qp_quants
// to the sub-blocks' summed weights.
void q2_k(const float* x, uint8_t* b, const float* qw) {
  uint8_t L[QK_K], *sc = b;
  float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
  uint16_t dh = 0, mh = 0;
  std::memset(sc, 0, 16);
  if (qw) {
    const float sigma2 = mean_sq(x, QK_K, 1.f);
    float sw[16];
    for (int j = 0; j < 16; ++j) {
      sw[j] = impl_weights(x + 16 * j, qw + 16 * j, 16, sigma2, w);
      scales[j] = qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36);
    }
    uint8_t Ls[16], Lm[16];
    dh = float_to_half(qp(16, 15, scales, Ls, sw));
    mh = float_to_half(qp(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  } else {
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
      scales[j] = qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
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
// [-4, 3] stored as 2 low bits plus a high bit in hmask (set when the code is >= 0). With
// importance weights: each sub-block's scale by make_qx_quants on its weights, and the 16 scales
// quantized by make_qx_quants on the sub-blocks' summed weights.
void q3_k(const float* x, uint8_t* b, const float* qw) {
  int8_t L[QK_K];
  float scales[16], max_scale = 0, amax = 0;
  uint8_t* sc = b + 96;
  std::memset(sc, 0, 12);
  uint16_t dh = 0;
  if (qw) {
    const float sigma2 = mean_sq(x, QK_K, 2.f);
    float w[16], sw[16];
    for (int j = 0; j < 16; ++j) {
      sw[j] = impl_weights(x + 16 * j, qw + 16 * j, 16, sigma2, w);
      scales[j] = qx(16, 4, x + 16 * j, L + 16 * j, w);
    }
    int8_t Ls[16];
    const float d_block = qx(16, 32, scales, Ls, sw);
    for (int j = 0; j < 16; ++j) {
      const int l = Ls[j];
      if (j < 8)
        sc[j] = static_cast<uint8_t>(l & 0xF);
      else
        sc[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      sc[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    dh = float_to_half(d_block);
  } else {
    for (int j = 0; j < 16; ++j) {
      scales[j] = q3(x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) amax = std::fabs(scales[j]), max_scale = scales[j];
    }
  }
  if (!qw && max_scale != 0) {
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

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and minimums. With importance weights: the
// weighted search over 37 ranges per sub-block, and d, dmin fitted by make_qp_quants.
void q45_k(const float* x, uint8_t* b, int nmax, const float* qw) {
  uint8_t L[QK_K];
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  uint8_t ls[8], lm[8];
  uint16_t dh, mh;
  if (qw) {
    const float sigma2 = mean_sq(x, QK_K, 2.f);
    float sw[8];
    for (int j = 0; j < 8; ++j) {
      sw[j] = impl_weights(x + 32 * j, qw + 32 * j, 32, sigma2, w);
      scales[j] = qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36);
    }
    dh = float_to_half(qp(8, 63, scales, ls, sw));
    mh = float_to_half(qp(8, 63, mins, lm, sw));
    if (nmax == 31)  // quantize_row_q5_K_impl clips; q4_K's stores the codes as they come
      for (int j = 0; j < 8; ++j) {
        ls[j] = std::min<uint8_t>(63, ls[j]);
        lm[j] = std::min<uint8_t>(63, lm[j]);
      }
  } else {
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
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(std::min(63, nearest(inv_scale * scales[j]) & 0xFF));
      lm[j] = static_cast<uint8_t>(std::min(63, nearest(inv_min * mins[j]) & 0xFF));
    }
    dh = float_to_half(max_scale / 63.f);
    mh = float_to_half(max_min / 63.f);
  }
  uint8_t* sc = b + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = ls[j];
      sc[j + 4] = lm[j];
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  // The codes are chosen for the scales as stored (get_scale_min_k4).
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      ls[j] = sc[j] & 63;
      lm[j] = sc[j + 4] & 63;
    } else {
      ls[j] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4));
      lm[j] = static_cast<uint8_t>((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
    }
  }
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

// Q6_K: with importance weights each sub-block's scale is fitted to them as they are (ggml's
// quantize_row_q6_K_impl leaves sigma2 out).
void q6_k(const float* x, uint8_t* b, const float* qw) {  // ql[128], qh[64], scales[16], d
  int8_t L[QK_K];
  float scales[16], max_scale = 0, max_abs = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = qx(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : nullptr);
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

// quantize_row_iq4_nl_impl with ntry = 7 (quantize_iq4_nl and
// quantize_iq4_xs): per 32 values the codes picked at d = max / -127 and their least-squares
// scale (weights x^2, or qw * sqrt(sigma2 + x^2) with importance weights), refined over 15
// candidate scales. IQ4_NL (one block of 32) picks the codes
// again for the stored scale; IQ4_XS quantizes the 8 scales to 6 bits against fp16
// d = -max scale / 32 and picks the codes again for each.
void iq4(const float* x, uint8_t* b, int sbs, const float* qw) {
  constexpr int ntry = 7;
  // sigma2 * (2 / sbs) in ggml; sbs is a power of two, so the same float.
  const float sigma2 = mean_sq(x, sbs, 2.f);
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
    if (qw)
      impl_weights(xb, qw + 32 * ib, 32, sigma2, w);
    else
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

void quantize_k(uint32_t id, const float* x, uint8_t* b, const float* qw) {
  if (id == 10)
    q2_k(x, b, qw);
  else if (id == 11)
    q3_k(x, b, qw);
  else if (id == 12)
    q45_k(x, b, 15, qw);
  else if (id == 13)
    q45_k(x, b, 31, qw);
  else if (id == 14)
    q6_k(x, b, qw);
  else if (id == 20)
    iq4(x, b, 32, qw);
  else
    iq4(x, b, QK_K, qw);
}

}  // namespace castscope::ggml

namespace castscope::ggml {

// Q4_0 / Q4_1 / Q5_0 / Q5_1 with element weights (quantize_row_q4_0_impl ...): Q4_0 and Q5_0
// fit their signed scale by make_qx_quants, Q4_1 and Q5_1 scale and minimum by the weighted
// make_qkx3_quants search.
void quantize_legacy_weighted(uint32_t id, const float* xb, const float* weight, uint8_t* b) {
  const bool five = id == 6 || id == 7;
  int8_t L[32];
  uint16_t dh;
  uint8_t* qs;
  if (id == 2 || id == 6) {
    dh = float_to_half(qx(32, five ? 16 : 8, xb, L, weight));
    qs = b + (five ? 6 : 2);
  } else {
    uint8_t U[32];
    float the_min;
    dh = float_to_half(qkx2(32, five ? 31 : 15, xb, weight, U, &the_min, -0.9f, 0.05f, 36));
    const uint16_t mh = float_to_half(-the_min);
    std::memcpy(b + 2, &mh, 2);
    for (int j = 0; j < 32; ++j) L[j] = static_cast<int8_t>(U[j]);
    qs = b + (five ? 8 : 4);
  }
  std::memcpy(b, &dh, 2);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((L[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((L[j + 16] & 0x10) >> 4) << (j + 16);
  }
  if (five) std::memcpy(b + (id == 6 ? 2 : 4), &qh, 4);
}

}  // namespace castscope::ggml
