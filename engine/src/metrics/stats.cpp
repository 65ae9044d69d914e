#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "castscope/metrics.hpp"
#include "metrics/error_sums.hpp"
#include "core/parallel.hpp"
#include "core/plan.hpp"
#include "core/group.hpp"
#include "families/codebook/cb_cast.hpp"

namespace castscope {

namespace detail {

Stats finish_stats(const ErrorSums& t, int64_t clipped) {
  Stats s;
  s.count = t.count;
  s.nonfinite_in = t.nonfinite_in;
  s.nonfinite_out = t.nonfinite_out;
  s.zeros_out = t.zeros_out;
  s.clipped = clipped;
  if (t.count) {
    s.mse = t.se2 / t.count;
    s.mean_err = t.se / t.count;
    s.signal_power = t.sx2 / t.count;
  }
  s.max_abs_err = t.maxe;
  s.snr_db = t.se2 > 0 ? 10.0 * std::log10(t.sx2 / t.se2) : std::numeric_limits<double>::infinity();
  return s;
}

}  // namespace detail

Stats compute_stats(const Tensor& original, const Tensor& values, int64_t clipped) {
  if (original.numel() != values.numel())
    throw Error("statistics need tensors of equal size (" + shape_str(original.shape()) + " vs " +
                shape_str(values.shape()) + ")");
  Tensor x = original.dtype() == DType::F32 || original.dtype() == DType::F64 ? original
                                                                              : original.to_f32();
  Tensor q = values.dtype() == DType::F32 ? values : values.to_f32();
  const float* qp = q.ptr<float>();
  const bool f64 = x.dtype() == DType::F64;
  // Chunk sums merged in chunk order, so that the figures do not depend on thread timing.
  constexpr int64_t kGrain = 1 << 16;
  std::vector<detail::ErrorSums> part(static_cast<size_t>((x.numel() + kGrain - 1) / kGrain),
                                      detail::ErrorSums{});
  detail::parallel_for(x.numel(), kGrain, 0, nullptr, [&](int64_t b, int64_t e) {
    detail::ErrorSums& a = part[static_cast<size_t>(b / kGrain)];
    if (f64) {
      for (int64_t i = b; i < e; ++i) a.add(x.ptr<double>()[i], qp[i]);
    } else {
      for (int64_t i = b; i < e; ++i) a.add(x.ptr<float>()[i], qp[i]);
    }
  });
  detail::ErrorSums total{};
  for (const detail::ErrorSums& a : part) total.merge(a);
  return detail::finish_stats(total, clipped);
}

std::string stats_line(const Stats& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "mse %.6g  snr %.3f dB  max_err %.6g  bias %.3g  clipped %lld (%.4f%%)  "
                "nonfinite_in %lld  nonfinite_out %lld  n %lld",
                s.mse, s.snr_db, s.max_abs_err, s.mean_err, static_cast<long long>(s.clipped),
                s.clipped_pct(), static_cast<long long>(s.nonfinite_in),
                static_cast<long long>(s.nonfinite_out), static_cast<long long>(s.count));
  return buf;
}

Histogram histogram(const float* v, int64_t n, double lo, double hi, int bins, bool log_x) {
  if (bins <= 0 || !(hi > lo)) throw Error("histogram needs bins > 0 and hi > lo");
  Histogram h;
  h.lo = lo;
  h.hi = hi;
  h.log_x = log_x;
  h.counts.assign(static_cast<size_t>(bins), 0);
  const double scale = bins / (hi - lo);
  for (int64_t i = 0; i < n; ++i) {
    double x = v[i];
    if (!std::isfinite(x)) {
      ++h.nonfinite;
      continue;
    }
    if (log_x) {
      if (x == 0) {
        ++h.zeros;
        continue;
      }
      x = std::log2(std::fabs(x));
    }
    if (x < lo) {
      ++h.below;
      continue;
    }
    if (x > hi) {
      ++h.above;
      continue;
    }
    int64_t b = static_cast<int64_t>((x - lo) * scale);
    if (b >= bins) b = bins - 1;  // x == hi lands in the last bin
    ++h.counts[static_cast<size_t>(b)];
  }
  return h;
}

Histogram error_histogram(const float* x, const float* q, int64_t n, double lo, double hi,
                          int bins) {
  std::vector<float> err;
  err.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) err.push_back(q[i] - x[i]);
  Histogram h = histogram(err.data(), static_cast<int64_t>(err.size()), lo, hi, bins, false);
  return h;
}

ExponentHistogram exponent_histogram(const float* v, int64_t n) {
  ExponentHistogram h;
  h.emin = -149;
  h.emax = 127;
  h.counts.assign(static_cast<size_t>(h.emax - h.emin + 1), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i];
    if (!std::isfinite(x)) {
      ++h.nonfinite;
      continue;
    }
    if (x == 0) {
      ++h.zeros;
      continue;
    }
    ++h.counts[static_cast<size_t>(std::ilogb(x) - h.emin)];
  }
  trim_exponents(h);
  return h;
}

void trim_exponents(ExponentHistogram& h) {
  int lo = 0, hi = static_cast<int>(h.counts.size()) - 1;
  while (lo < hi && h.counts[lo] == 0) ++lo;
  while (hi > lo && h.counts[hi] == 0) --hi;
  h.counts = std::vector<uint64_t>(h.counts.begin() + lo, h.counts.begin() + hi + 1);
  h.emax = h.emin + hi;
  h.emin = h.emin + lo;
}

TileMap tile_map(const Tensor& x_f32, const Tensor& values, const CastResult& result) {
  if (result.options.flatten) {
    // The tiles are those of the flattened view (a conv weight's [O, I*kh*kw]).
    const CastResult v = as_view(result);
    return tile_map(x_f32.reshaped(v.shape), values.reshaped(v.shape), v);
  }
  CastResult a = result.mode == CastMode::Compress ? unpack(result) : result;
  if (a.mode == CastMode::Actual && a.dtype.codebook()) {
    // Scales as those of the compute format with the same tile; then the mapping choices.
    const codebook::Layout l = codebook::make_layout(a.shape, a.dtype, a.options);
    codebook::validate_actual(a, l);
    CastResult s = a;
    s.dtype = l.plan.dtype;
    s.meta = Tensor();
    TileMap m = tile_map(x_f32, values, s);
    Tensor meta = a.meta;
    if (l.plan.permuted) {
      meta = Tensor::empty(DType::U8, l.meta_perm_shape);
      detail::permute(a.meta.data(), meta.mutable_data(), 1, a.meta.shape(), l.plan.perm);
    }
    m.subs_per_tile = l.tile / l.sub;
    m.sub_mapping.assign(meta.ptr<uint8_t>(), meta.ptr<uint8_t>() + meta.numel());
    m.mapping.resize(m.scale_value.size());
    std::vector<int> count(static_cast<size_t>(a.dtype.codebook()->num_maps()));
    for (size_t k = 0; k < m.mapping.size(); ++k) {
      std::fill(count.begin(), count.end(), 0);
      for (int j = 0; j < m.subs_per_tile; ++j) ++count[m.sub_mapping[k * m.subs_per_tile + j]];
      m.mapping[k] =
          static_cast<int16_t>(std::max_element(count.begin(), count.end()) - count.begin());
    }
    return m;
  }
  if (a.mode != CastMode::Actual || !family_traits(a.dtype.family()).grammar || !a.dtype.scaled() ||
      a.dtype.tensor_scaled())
    throw Error(
        "a tile map needs an actual or compressed cast of a tile- or channel-scaled datatype");
  detail::CastPlan p = detail::make_plan(a.shape, a.dtype, a.options);
  detail::KernelParams kp = detail::kernel_params(p);
  if (x_f32.dtype() != DType::F32 || x_f32.numel() != p.numel() || values.numel() != p.numel())
    throw Error("tile map needs the float32 input and the cast values of the same tensor");
  auto perm_of = [&](const Tensor& t) { return detail::permuted(t, p); };
  Tensor x = perm_of(x_f32.reshaped(a.shape.empty() ? Shape{1} : a.shape));
  Tensor q = perm_of(values.reshaped(a.shape.empty() ? Shape{1} : a.shape));
  Tensor sc = perm_of(a.scale);
  TileMap m;
  m.rows = p.B * p.gr;
  m.cols = p.gc;
  m.tile_rows = p.tr;
  m.tile_cols = p.tc;
  const int64_t g = p.groups();
  m.scale_code.resize(g);
  m.scale_value.resize(g);
  m.absmax.resize(g);
  m.snr_db.resize(g);
  const float* xp = x.ptr<float>();
  const float* qp = q.ptr<float>();
  if (p.multiscale)
    kp.tensor_scale = scalar::decode_value(
        detail::load_code(a.tenscale.data(), p.second_dtype, 0, kp.second), kp.second);
  detail::parallel_for(g, 256, 0, nullptr, [&](int64_t gb, int64_t ge) {
    for (int64_t k = gb; k < ge; ++k) {
      const int64_t per = p.gr * p.gc;
      const int64_t b = k / per, gi = (k % per) / p.gc, gj = k % p.gc;
      const uint32_t code = detail::load_code(sc.data(), p.scale_dtype, k, kp.scale);
      detail::GroupScale gs = detail::scale_from_codes(kp, code, 0);
      m.scale_code[k] = code;
      m.scale_value[k] =
          gs.nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(gs.s);
      double amax = 0, sx2 = 0, se2 = 0;
      for (int64_t i = gi * p.tr; i < std::min(p.R, (gi + 1) * p.tr); ++i)
        for (int64_t j = gj * p.tc; j < std::min(p.C, (gj + 1) * p.tc); ++j) {
          const int64_t e = b * p.R * p.C + i * p.C + j;
          if (!std::isfinite(xp[e])) continue;
          amax = std::max(amax, std::fabs(static_cast<double>(xp[e])));
          const double d = static_cast<double>(qp[e]) - xp[e];
          sx2 += static_cast<double>(xp[e]) * xp[e];
          se2 += d * d;
        }
      m.absmax[k] = static_cast<float>(amax);
      m.snr_db[k] = se2 > 0 ? static_cast<float>(10 * std::log10(sx2 / se2))
                            : std::numeric_limits<float>::infinity();
    }
  });
  return m;
}

}  // namespace castscope
