#include "families/codebook/cb_lut.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace castscope::detail::cb {
namespace {

// The squared-error sums of one subtile: R row entries per element (8 or 16, at least the
// mappings), each d = mag * up - |x| and sse += d * d, exactly encode_sub's operations (no
// contraction: this file is compiled with -ffp-contract=off).
template <int R>
inline __attribute__((always_inline)) void sums(const Lut& t, const double* x, const uint8_t* k,
                                                int n, double up, double* sse) {
  double acc[R] = {};  // not sse itself, which the compiler must assume may alias x
  for (int i = 0; i < n; ++i) {
    const double a = x[i] < 0 ? -x[i] : x[i];
    const uint16_t* h = t.hi16.data() + k[i] * R;
    for (int m = 0; m < R; ++m) {
      const double d = add_rn(mul_rn(row_mag(h[m]), up), -a);
      acc[m] = add_rn(acc[m], mul_rn(d, d));
    }
  }
  for (int m = 0; m < R; ++m) sse[m] = acc[m];
}

// Compiled for AVX2 and the baseline, picked at load time (plain functions: compilers do not
// clone templates).
__attribute__((target_clones("avx2", "default"))) void sums8(const Lut& t, const double* x,
                                                             const uint8_t* k, int n, double up,
                                                             double* sse) {
  sums<8>(t, x, k, n, up, sse);
}
__attribute__((target_clones("avx2", "default"))) void sums16(const Lut& t, const double* x,
                                                              const uint8_t* k, int n, double up,
                                                              double* sse) {
  sums<16>(t, x, k, n, up, sse);
}

}  // namespace

TileResult encode_tile_lut(const Params& p, const Lut& t, const double* x, int n,
                           int64_t subs_per_row, int64_t row, int64_t c0, uint8_t* codes,
                           float* values, uint8_t* meta, uint8_t* k) {
  TileResult r;
  const GroupScale g = tile_scale(p, x, n, r.nonfinite);
  r.scale_code = g.scale_code;
  if (!scale_usable(p, g)) {
    encode_subtiles(p, g, x, n, subs_per_row, row, c0, codes, values, meta);
    return r;
  }
  const double up = p.kp.scale_is_exponent ? scalar::pow2(g.shift) : g.s;
  for (int i = 0; i < n; ++i) {
    // scaled_abs of +|x|: a negative zero would read as a huge magnitude's bits.
    const double as = scaled_abs(p, g, x[i] < 0 ? -x[i] : x[i] + 0.0);
    r.clipped += as > p.kp.data_max;
    k[i] = static_cast<uint8_t>(interval_steps(t, as));
  }
  const int rw = t.row_groups * 8;
  double sse[16];
  for (int s0 = 0; s0 < p.tile; s0 += p.sub) {
    const int ns = n - s0 < p.sub ? n - s0 : p.sub;
    int best = 0;
    if (ns > 0) {
      (rw == 8 ? sums8 : sums16)(t, x + s0, k + s0, ns, up, sse);
      double best_sse = sse[0];
      for (int m = 1; m < p.nmaps; ++m)
        if (sse[m] < best_sse) {
          best = m;
          best_sse = sse[m];
        }
      for (int i = s0; i < s0 + ns; ++i) {
        const bool neg = sign_bit(x[i]);
        if (codes)
          codes[i] = static_cast<uint8_t>(code_of(p.half, t.slot[k[i] * t.width + best], neg));
        if (values) {
          const double v = mul_rn(row_mag(t.hi16[k[i] * rw + best]), up);
          values[i] = scalar::to_f32(neg ? -v : v);
        }
      }
    }
    if (meta) meta[row * subs_per_row + (c0 + s0) / p.sub] = static_cast<uint8_t>(best);
  }
  return r;
}

Lut build_lut(const Params& p) {
  Lut l;
  if (p.nmaps < 1 || p.nmaps > 16) {
    l.why = "more than 16 mappings";
    return l;
  }
  l.width = p.nmaps <= 2 ? 2 : p.nmaps <= 4 ? 4 : p.nmaps <= 8 ? 8 : 16;
  l.row_groups = l.width == 16 ? 2 : 1;
  // The thresholds exactly as nearest_slot computes them.
  for (int m = 0; m < p.nmaps; ++m) {
    const double* mag = p.mags + m * p.half;
    double prev = 0;
    for (int j = 1; j < p.half; ++j) {
      const double v = mag[j];
      if (!(v > 0)) continue;
      l.thr.push_back((prev + v) * 0.5);
      prev = v;
    }
  }
  std::sort(l.thr.begin(), l.thr.end());
  l.thr.erase(std::unique(l.thr.begin(), l.thr.end()), l.thr.end());
  LutIndex& ix = l.ix;
  ix.nthr = static_cast<int>(l.thr.size());
  if (ix.nthr > 255) {
    l.why = "more than 255 distinct midpoints";
    return l;
  }
  const int rows = ix.nthr + 1;
  l.slot.assign(static_cast<size_t>(rows) * l.width, 0);
  l.hi16.assign(static_cast<size_t>(rows) * l.row_groups * 8, 0);
  for (int k = 0; k < rows; ++k) {
    // Every threshold is positive; the largest one at or below the interval's start stands for
    // the whole interval.
    const double rep = k == 0 ? 0.0 : l.thr[k - 1];
    for (int m = 0; m < p.nmaps; ++m) {
      const double* mag = p.mags + m * p.half;
      const int j = nearest_slot(mag, p.half, rep);
      const uint64_t bits = scalar::double_bits(mag[j]);
      if (bits & 0xFFFFFFFFFFFFull) {
        l.why = "a magnitude with more than 5 significant bits";
        return l;
      }
      l.slot[static_cast<size_t>(k) * l.width + m] = static_cast<uint8_t>(j);
      l.hi16[static_cast<size_t>(k) * l.row_groups * 8 + m] = static_cast<uint16_t>(bits >> 48);
    }
  }
  l.same.assign(static_cast<size_t>(rows) * l.width, 0);
  for (int k = 0; k < rows; ++k) {
    const uint16_t* h = l.hi16.data() + static_cast<size_t>(k) * l.row_groups * 8;
    for (int m = 0; m < p.nmaps; ++m)
      for (int n = 0; n < p.nmaps; ++n)
        if (h[n] == h[m]) l.same[static_cast<size_t>(k) * l.width + m] |= uint16_t(1u << n);
  }
  if (ix.nthr) {
    ix.emin = std::ilogb(l.thr[0]);
    ix.octaves = std::ilogb(l.thr.back()) - ix.emin + 1;
    if (ix.emin < -1022) {
      l.why = "a midpoint below the normal double range";
      return l;
    }
    if (ix.octaves + 2 > kMaxBuckets) {
      l.why = "midpoints spread over more octaves than the bucket table holds";
      return l;
    }
    // The most fraction bits of any midpoint (all normal here), at most the top word's 20.
    for (double t : l.thr) {
      const uint64_t f = scalar::double_bits(t) & ((uint64_t{1} << 52) - 1);
      ix.sub_bits = std::max(ix.sub_bits, f ? 52 - std::countr_zero(f) : 0);
    }
    ix.sub_bits = std::min(ix.sub_bits, 20);
    while (ix.sub_bits > 0 && (int64_t{ix.octaves + 1} << ix.sub_bits) >= kMaxBuckets)
      --ix.sub_bits;
  }
  const int nb = ix.octaves << ix.sub_bits, row = 1 << ix.sub_bits;
  auto low = [&](int b) {
    return std::ldexp(1.0 + std::ldexp(b & (row - 1), -ix.sub_bits), ix.emin + (b >> ix.sub_bits));
  };
  l.bucket.assign(static_cast<size_t>(ix.buckets()), 0);
  l.bucket.back() = static_cast<uint8_t>(ix.nthr);
  for (int b = 0; b < nb; ++b) {
    const int k =
        static_cast<int>(std::upper_bound(l.thr.begin(), l.thr.end(), low(b)) - l.thr.begin());
    l.bucket[row + b] = static_cast<uint8_t>(k);
    // A magnitude in bucket b lies below the next bucket's lower end (the last one's: the octave
    // above the largest midpoint), so it passes at most the midpoints strictly inside the bucket.
    const double next = b + 1 < nb ? low(b + 1) : std::ldexp(1.0, ix.emin + ix.octaves);
    const int below_next =
        static_cast<int>(std::lower_bound(l.thr.begin(), l.thr.end(), next) - l.thr.begin());
    ix.max_steps = std::max(ix.max_steps, below_next - k);
  }
  l.thr_pad = l.thr;
  l.thr_pad.resize(l.thr.size() + ix.max_steps, std::numeric_limits<double>::infinity());
  l.ok = true;
  return l;
}

}  // namespace castscope::detail::cb
