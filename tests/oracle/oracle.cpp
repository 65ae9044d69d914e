#include "oracle.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include "test_seed.hpp"

using castscope::DataType;
using castscope::NumberSpec;

namespace oracle {

uint64_t test_seed() {
  return castscope::test::test_seed();
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bits_of(a) == bits_of(b);
}

FloatFmt describe(const NumberSpec& n) {
  FloatFmt f;
  f.ebits = n.ebits();
  f.mbits = n.mbits();
  f.bias = n.bias();
  f.emax = n.emax();
  f.emin = n.emin();
  f.max = n.max();
  f.min_sub = n.min_subnormal();
  f.name = n.name();
  // The InfNan name is the only public word on the special codes: "ieee" (inf + nan), "fn" (nan
  // only, negative zero kept), "fnuz" (nan in the negative-zero code), "none" (all finite).
  const std::string k = castscope::to_string(n.infnan());
  f.has_inf = k == "ieee";  // "finite": OCP FP6 / FP4, no special codes
  f.has_nan = k == "ieee" || k == "fn" || k == "fnuz";
  f.has_negzero = k != "fnuz";
  if (std::ldexp(1.0, f.emin - f.mbits) != f.min_sub)
    throw std::runtime_error("oracle: " + f.name + " min_subnormal is not 2^(emin-mbits)");
  return f;
}

double round_int(double x, ORound r) {
  const double a = std::fabs(x);
  const double n = std::floor(a);
  const double frac = a - n;
  double q = n;
  if (frac > 0.5) {
    q = n + 1;
  } else if (frac == 0.5) {
    if (r == ORound::Away) q = n + 1;
    if (r == ORound::Even && std::fmod(n, 2.0) != 0) q = n + 1;
  }
  return std::copysign(q, x);
}

double round_float(double x, const FloatFmt& f, ORound r, OOverflow o) {
  // NaN stays NaN where the format has one (decision 5); OCP FP6/FP4 have none: +0
  // (docs/formats.md).
  if (std::isnan(x)) return f.has_nan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  const double inf = std::numeric_limits<double>::infinity();
  double q;
  if (std::isinf(x)) {
    q = inf;
  } else if (x == 0) {
    q = 0;
  } else {
    int k;
    std::frexp(std::fabs(x), &k);  // |x| = m 2^k, m in [0.5, 1): binade exponent k - 1
    const int e = std::max(k - 1, f.emin);
    const double ulp = std::ldexp(1.0, e - f.mbits);
    q = round_int(std::fabs(x) / ulp, r) * ulp;
  }
  if (q > f.max) {
    if (o == OOverflow::Saturate || (!f.has_inf && !f.has_nan)) {
      q = f.max;
    } else {
      q = f.has_inf ? inf : std::numeric_limits<double>::quiet_NaN();
      if (std::isnan(q)) return q;
    }
  }
  if (q == 0 && !f.has_negzero) return 0.0;
  return std::copysign(q, x);
}

static int floor_log2(double a) {
  int k;
  std::frexp(a, &k);
  return k - 1;
}

int select_exponent(double absmax, const NumberSpec& n, OScale m) {
  const int fl = floor_log2(absmax);
  if (!n.is_float() || n.ebits() <= 1 || m == OScale::Floor) return fl;
  const bool pow2 = absmax == std::ldexp(1.0, fl);
  const double scaled = absmax / std::ldexp(1.0, fl);  // in [1, 2)
  switch (m) {
    case OScale::Ceil:
      return pow2 ? fl : fl + 1;
    case OScale::Midmax: {
      // Decision 3: halfway between max and the next value the top binade's spacing would give.
      const double midmax = n.max() + std::ldexp(1.0, n.emax() - n.mbits() - 1);
      return scaled > midmax / std::ldexp(1.0, n.emax()) ? fl + 1 : fl;
    }
    case OScale::TopBinade:
      return scaled > n.max() / std::ldexp(1.0, n.emax()) ? fl + 1 : fl;
    case OScale::Option3: {
      const double ascale = std::ldexp(1.0, fl - n.mbits());
      return floor_log2(round_int(absmax / ascale, ORound::Even) * ascale);
    }
    default:
      return fl;
  }
}

bool supports(const DataType& d) {
  if (d.family() != castscope::Family::Standard) return false;
  if (!d.scaled()) return d.number().is_float();
  const auto& s = *d.scale();
  if (d.number().is_exponent()) return false;
  if (d.number().is_uint())
    return s.scale.is_float() && s.second && (s.second->is_float() || s.second->is_int()) &&
           !d.sparse_tile() && !d.subtile();
  if (d.sparse_tile()) return false;
  if (s.scale.is_exponent()) return !s.second;  // exponent tensor scale + exponent scale: no
  if (!s.scale.is_float()) return false;
  if (s.second && !s.second->is_float()) return false;
  if (d.subtile()) return false;
  return true;
}

namespace {

// Saturation count of the cast in progress (the oracle is single-threaded).
int64_t g_clipped = 0;

// True when x, rounded on the grid without an upper bound, lands above max and saturates.
bool saturates(double x, const FloatFmt& f, ORound r, OOverflow o) {
  if (!std::isfinite(x)) return false;
  FloatFmt unbounded = f;
  unbounded.max = std::numeric_limits<double>::infinity();
  if (std::fabs(round_float(x, unbounded, r, o)) <= f.max) return false;
  return o == OOverflow::Saturate || (!f.has_inf && !f.has_nan);
}

// Element indices grouped by the scale they share; for subtiles also by subtile.
struct Groups {
  std::vector<std::vector<int64_t>> tiles;
  std::vector<int64_t> sub_of;  // subtile id of each element (-1: none)
  int64_t nsub = 0;
};

Groups make_groups(const std::vector<int64_t>& shape, const DataType& d, int axis) {
  const int rank = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  Groups g;
  g.sub_of.assign(total, -1);
  const auto& tiles = d.scale()->tiles;
  if (tiles.empty()) {
    g.tiles.emplace_back();
    for (int64_t i = 0; i < total; ++i) g.tiles[0].push_back(i);
    return g;
  }
  const int a = axis < 0 ? axis + rank : axis;
  std::vector<std::pair<int, castscope::TileSpec>> per_axis;
  if (tiles.size() == 1) {
    per_axis = {{a, tiles[0]}};
  } else {
    per_axis = {{a - 1, tiles[0]}, {a, tiles[1]}};
  }
  std::map<std::vector<int64_t>, int64_t> ids, sub_ids;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t r = i;
    for (int k = rank - 1; k >= 0; --k) {
      idx[k] = r % shape[k];
      r /= shape[k];
    }
    std::vector<int64_t> key = idx, skey = idx;
    bool has_sub = false;
    for (const auto& [ax, t] : per_axis) {
      key[ax] = t.channel() ? 0 : idx[ax] / t.size;
      if (t.sub > 0) {
        has_sub = true;
        skey[ax] = idx[ax] / t.sub;
      } else {
        skey[ax] = key[ax];
      }
    }
    auto it = ids.find(key);
    if (it == ids.end()) {
      it = ids.emplace(key, static_cast<int64_t>(g.tiles.size())).first;
      g.tiles.emplace_back();
    }
    g.tiles[it->second].push_back(i);
    if (has_sub) {
      auto st = sub_ids.find(skey);
      if (st == sub_ids.end()) st = sub_ids.emplace(skey, g.nsub++).first;
      g.sub_of[i] = st->second;
    }
  }
  return g;
}

// A kept zero takes the input's sign where the element format has a negative zero.
float signed_zero(double x, bool negzero) {
  return (std::signbit(x) && negzero) ? -0.0f : 0.0f;
}

// Integer element on the grid q * 2^(s - (K-2)) with q in [-(2^(K-1)-1), 2^(K-1)-1].
double int_fixed_point(double x, int bits, int s, ORound r) {
  const double lim = std::ldexp(1.0, bits - 1) - 1;
  double q = round_int(std::ldexp(x, bits - 2 - s), r);
  if (std::fabs(q) > lim) ++g_clipped;
  q = std::min(lim, std::max(-lim, q));
  if (q == 0) return std::copysign(0.0, x);
  return std::ldexp(q, s - (bits - 2));
}

// Asymmetric uint data (decision 7, second half; the formulas are this oracle's reading of
// TensorCast, which the spec does not spell out): over the tile's finite values and 0,
//   scale = (max - min) / (2^K - 1) in double, rounded once to the scale format;
//   float zero point: zero = min cast to the zero format, q = round((x - zero) / scale),
//     value = q * scale + zero;
//   int zero point: zero = round(-min / scale) (nearest even, clamped to the zero format),
//     q = round(x / scale + zero), value = (q - zero) * scale;
// q is clamped to [0, 2^K - 1]; values are computed in double and rounded once to float32. The
// round mode applies to the code q (so "zero" means ties toward code 0, the bottom of the range,
// and "even" picks the even code), as in TensorCast, which rounds the shifted, scaled tensor.
std::vector<float> cast_uint(const std::vector<float>& x, const Groups& g, const DataType& d,
                             const Options& o) {
  const NumberSpec& n = d.number();
  const auto& ss = *d.scale();
  const FloatFmt sf = describe(ss.scale);
  const double qmax = static_cast<double>(n.int_max());
  std::vector<float> out(x.size());
  for (const auto& tile : g.tiles) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int64_t i : tile)
      if (std::isfinite(x[i])) {
        lo = std::min(lo, static_cast<double>(x[i]));
        hi = std::max(hi, static_cast<double>(x[i]));
      }
    // The range always includes 0, so that an int zero point represents 0.0 exactly
    // (tensorcast-scaling.md) and a one-signed tile still has a range.
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    // Decision 13 / docs/formats.md: the quotient in double, rounded once to the scale format
    // (an intermediate float32 rounding can land on a tie of the scale format and round the
    // other way).
    const double sc = round_float((hi - lo) / qmax, sf, ORound::Even, OOverflow::Saturate);
    if (!(sc > 0)) {
      // No range: an all-zero tile decodes to zeros (decision 12); a constant non-zero tile, or
      // one whose range underflows the scale format, is left open by the spec.
      for (int64_t i : tile) {
        out[i] = 0.0f;
        if (o.open && (lo != 0 || hi != 0)) (*o.open)[i] = 1;
      }
      continue;
    }
    if (ss.second->is_float()) {
      const FloatFmt zf = describe(*ss.second);
      const double zero = round_float(lo, zf, ORound::Even, OOverflow::Saturate);
      for (int64_t i : tile) {
        if (std::isnan(x[i])) {
          out[i] = NAN;
          continue;
        }
        const double raw = round_int((x[i] - zero) / sc, o.round);
        if (std::isfinite(x[i]) && (raw < 0 || raw > qmax)) ++g_clipped;
        const double q = std::min(qmax, std::max(0.0, raw));
        out[i] = static_cast<float>(q * sc + zero);
      }
    } else {
      const double zlim_lo = static_cast<double>(ss.second->int_min());
      const double zlim_hi = static_cast<double>(ss.second->int_max());
      const double zero = std::min(zlim_hi, std::max(zlim_lo, round_int(-lo / sc, ORound::Even)));
      for (int64_t i : tile) {
        if (std::isnan(x[i])) {
          out[i] = NAN;
          continue;
        }
        const double raw = round_int(x[i] / sc + zero, o.round);
        if (std::isfinite(x[i]) && (raw < 0 || raw > qmax)) ++g_clipped;
        const double q = std::min(qmax, std::max(0.0, raw));
        const double v = (q - zero) * sc;
        out[i] = v == 0 ? 0.0f : static_cast<float>(v);
      }
    }
  }
  return out;
}

}  // namespace

static std::vector<float> cast_values_impl(const std::vector<float>& x,
                                           const std::vector<int64_t>& shape, const DataType& d,
                                           const Options& o);

std::vector<float> cast_values(const std::vector<float>& x, const std::vector<int64_t>& shape,
                               const DataType& d, const Options& o) {
  g_clipped = 0;
  std::vector<float> out = cast_values_impl(x, shape, d, o);
  if (o.clipped) *o.clipped = g_clipped;
  return out;
}

static std::vector<float> cast_values_impl(const std::vector<float>& x,
                                           const std::vector<int64_t>& shape, const DataType& d,
                                           const Options& o) {
  if (!supports(d)) throw std::runtime_error("oracle: unsupported datatype " + d.str());
  const NumberSpec& n = d.number();
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  std::vector<float> out(x.size());
  if (!d.scaled()) {
    const FloatFmt f = describe(n);
    for (size_t i = 0; i < x.size(); ++i) {
      g_clipped += saturates(x[i], f, o.round, o.overflow);
      out[i] = static_cast<float>(round_float(x[i], f, o.round, o.overflow));
    }
    return out;
  }
  const auto& ss = *d.scale();
  const Groups g = make_groups(shape, d, o.axis);
  if (n.is_uint()) return cast_uint(x, g, d, o);
  const bool is_int = n.is_int();
  const FloatFmt ef = is_int ? FloatFmt{} : describe(n);
  // Integer codes have a single zero, so -0 and negative values that round to zero give +0.
  const bool negzero = !is_int && ef.has_negzero;
  auto elem_exp = [&](double v, int s) -> double {  // element v at exponent scale 2^s
    if (is_int) return int_fixed_point(v, n.bits(), s, o.round);
    g_clipped += saturates(std::ldexp(v, -s), ef, o.round, o.overflow);
    return std::ldexp(round_float(std::ldexp(v, -s), ef, o.round, o.overflow), s);
  };

  if (ss.scale.is_exponent()) {
    const NumberSpec& sn = ss.scale;
    for (const auto& tile : g.tiles) {
      double absmax = 0;
      bool nonfinite = false;
      for (int64_t i : tile) {
        if (!std::isfinite(x[i]))
          nonfinite = true;
        else
          absmax = std::max(absmax, std::fabs(static_cast<double>(x[i])));
      }
      if (nonfinite) {  // decision 5: the tile's scale is NaN
        for (int64_t i : tile) out[i] = static_cast<float>(qnan);
        continue;
      }
      if (absmax == 0) {
        for (int64_t i : tile) out[i] = signed_zero(x[i], negzero);
        continue;
      }
      const int e = select_exponent(absmax, n, is_int ? OScale::Floor : o.scale);
      const int s = std::min(sn.emax(), std::max(sn.emin(), e - n.emax()));
      // Subtiles (decisions 10, 14): a subtile's offset is how far its own shared exponent (same
      // mode) lies below the tile's (clamped) one, at most 2^K - 1; all-zero subtiles take the
      // most. The offset is stored apart from the scale, so the lowered exponent may leave the
      // scale format's range.
      std::map<int64_t, double> submax;
      for (int64_t i : tile)
        if (g.sub_of[i] >= 0) {
          double& m = submax[g.sub_of[i]];
          m = std::max(m, std::fabs(static_cast<double>(x[i])));
        }
      for (int64_t i : tile) {
        int si = s;
        if (g.sub_of[i] >= 0) {
          const double m = submax[g.sub_of[i]];
          const int most = (1 << d.subtile()->offset) - 1;
          const int own = m == 0 ? s + n.emax() - most
                                 : select_exponent(m, n, is_int ? OScale::Floor : o.scale);
          si = s - std::clamp(s + n.emax() - own, 0, most);
        }
        const double v = elem_exp(x[i], si);
        out[i] = v == 0 ? signed_zero(x[i], negzero) : static_cast<float>(v);
      }
    }
    return out;
  }

  // Float scales (decision 13): scale = absmax / (largest element) by correctly rounded
  // division, cast to the scale format (nearest even, saturating). Multiscale: the tensor scale
  // first, then each tile scale relative to it.
  const FloatFmt sf = describe(ss.scale);
  const double elem_max = is_int ? static_cast<double>(n.int_max()) : n.max();
  auto to_fmt = [](double v, const FloatFmt& f) {
    return round_float(v, f, ORound::Even, OOverflow::Saturate);
  };
  double tenscale = 1;
  if (ss.second) {
    double amax = 0;
    for (float v : x)
      if (std::isfinite(v)) amax = std::max(amax, std::fabs(static_cast<double>(v)));
    const FloatFmt tf = describe(*ss.second);
    // docs/formats.md: computed in double and rounded once, to the scale's own format.
    tenscale = to_fmt(amax / (elem_max * ss.scale.max()), tf);
  }
  for (const auto& tile : g.tiles) {
    double absmax = 0;
    for (int64_t i : tile)
      if (std::isfinite(x[i])) absmax = std::max(absmax, std::fabs(static_cast<double>(x[i])));
    double sc = 0;
    if (absmax > 0 && tenscale > 0) {
      // docs/formats.md: tile scales are chosen for absmax / tenscale, in double, rounded once.
      const double raw = ss.second ? (absmax / tenscale) / elem_max : absmax / elem_max;
      sc = to_fmt(raw, sf);
    }
    for (int64_t i : tile) {
      const double v = x[i];
      if (std::isnan(v)) {
        out[i] = static_cast<float>(qnan);
        continue;
      }
      if (sc == 0) {
        out[i] = signed_zero(v, negzero);
        continue;
      }
      double q;
      const double xs = v / (sc * tenscale);  // exact product: sc has few significant bits
      if (is_int) {
        const double lim = static_cast<double>(n.int_max());
        q = round_int(xs, o.round);
        if (std::isfinite(v) && std::fabs(q) > lim) ++g_clipped;
        q = std::min(lim, std::max(-lim, q));
      } else {
        g_clipped += saturates(xs, ef, o.round, o.overflow);
        q = round_float(xs, ef, o.round, o.overflow);
      }
      const double val = q * sc * tenscale;
      out[i] = val == 0 ? signed_zero(v, negzero) : static_cast<float>(val);
    }
  }
  return out;
}

}  // namespace oracle
