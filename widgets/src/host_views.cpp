#include "host_views.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/group.hpp"
#include "core/parallel.hpp"
#include "core/plan.hpp"

namespace castscope::widgets {

namespace {

inline uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// Slots past a histogram's bins in the per-chunk count arrays.
enum Slot { kBelow = 0, kAbove = 1, kNonfinite = 2, kZeroOrSkip = 3, kSlots = 4 };
constexpr int kExpSlots = 279;  // floor(log2|v|) + 149 for -149..127, then non-finite, zero
constexpr int64_t kBlock = 2048;

// The first pass's sums of a chunk. The sums run in element order in lane 0, as compute_stats
// adds them (chunks of the same 2^16 elements, merged in chunk order), so that the Views' SNR
// equals the figure of the model map, `castscope-cli` and Python to the bit; the other lanes
// hold the maxima and stay zero for the sums.
struct StatLanes {
  double sx2[4] = {}, se2[4] = {}, se[4] = {}, maxe[4] = {};
  int64_t count = 0, nin = 0, nout = 0, zout = 0;
  float amax = 0;
};

// compute_stats' quantities, branch-free: a pair outside the finite inputs and outputs adds 0.
void stats_scalar(const float* x, const float* q, int64_t i0, int64_t n, StatLanes& s) {
  for (; i0 < n; i0 += 4) {
    for (int l = 0; l < 4 && i0 + l < n; ++l) {
      const int64_t i = i0 + l;
      const float xf = x[i], qf = q[i];
      const bool fx = (float_bits(xf) & 0x7FFFFFFF) < 0x7F800000;
      const bool fq = (float_bits(qf) & 0x7FFFFFFF) < 0x7F800000;
      const bool ok = fx && fq;
      const double xv = ok ? static_cast<double>(xf) : 0.0, qv = ok ? static_cast<double>(qf) : 0.0;
      const double d = qv - xv;
      s.sx2[0] += xv * xv;
      s.se2[0] += d * d;
      s.se[0] += d;
      s.maxe[l] = std::max(s.maxe[l], std::fabs(d));
      s.count += ok;
      s.nin += !fx;
      s.nout += fx && !fq;
      s.zout += ok && qv == 0 && xv != 0;
      s.amax = std::max(s.amax, fx ? std::fabs(xf) : 0.f);
    }
  }
}

// The sums stay one chain in element order, as compute_stats adds them: four vector lanes would
// be faster but give other last bits than the model map, the CLI and Python.
void stats_block(const float* x, const float* q, int64_t n, StatLanes& s) {
  stats_scalar(x, q, 0, n, s);
}

inline int exp_slot(uint32_t u) {
  u &= 0x7FFFFFFF;
  const int e = static_cast<int>(u >> 23);
  const int lb = e ? e - 127 : (31 - __builtin_clz(u | 1)) - 149;
  return u >= 0x7F800000 ? 277 : u == 0 ? 278 : lb + 149;
}

// The bin histogram(v, n, lo, hi, bins, true) gives a float: std::log2 of |v| in double, then
// the linear bin. std::log2 per value would be most of a host update's cost, so each binade in
// the histogram's range gets the significands at which the bin steps up, found by bisection of
// that same formula (which rises with |v|); a value's bin is its binade's first bin plus the
// steps at or below its significand. Subnormals, binades outside the table and binades of more
// than kSteps steps take the formula itself.
class LogBins {
 public:
  static constexpr int kSteps = 8;
  LogBins(double lo, double hi, int bins, int emin, int emax)
      : lo_(lo), hi_(hi), scale_(bins / (hi - lo)), bins_(bins) {
    emin_ = std::max(emin, -126);
    emax_ = std::min(emax, 127);
    for (int e = emin_; e <= emax_; ++e) {
      Binade b;
      auto at = [&](uint32_t f) { return reference((static_cast<uint32_t>(e + 127) << 23) | f); };
      b.base = at(0);
      const int top = at((1u << 23) - 1);
      b.direct = top - b.base > kSteps;
      for (int k = 0; k < kSteps; ++k) b.steps[k] = 0xFFFFFFFFu;
      for (int target = b.base + 1; !b.direct && target <= top; ++target) {
        uint32_t l = 0, h = (1u << 23) - 1;  // at(l) < target <= at(h)
        while (h - l > 1) {
          const uint32_t mid = l + (h - l) / 2;
          (at(mid) >= target ? h : l) = mid;
        }
        b.steps[target - b.base - 1] = h;
      }
      table_.push_back(b);
    }
  }
  // The bin of a finite non-zero float's magnitude bits u, or -1 below lo, bins above hi.
  int bin(uint32_t u) const {
    const int e = static_cast<int>(u >> 23) - 127;
    if (e < emin_ || e > emax_) return reference(u);
    const Binade& b = table_[static_cast<size_t>(e - emin_)];
    if (b.direct) return reference(u);
    const uint32_t f = u & 0x7FFFFF;
    int r = b.base;
    for (int k = 0; k < kSteps; ++k) r += f >= b.steps[k];
    return r;
  }
  int reference(uint32_t u) const {
    float v;
    std::memcpy(&v, &u, 4);
    const double x = std::log2(std::fabs(static_cast<double>(v)));
    if (x < lo_) return -1;
    if (x > hi_) return bins_;
    int64_t b = static_cast<int64_t>((x - lo_) * scale_);
    if (b >= bins_) b = bins_ - 1;
    return static_cast<int>(b);
  }

 private:
  struct Binade {
    int base = 0;
    bool direct = false;
    uint32_t steps[kSteps];
  };
  double lo_, hi_, scale_;
  int bins_, emin_ = 0, emax_ = -1;
  std::vector<Binade> table_;
};

// The log histogram's slot of each value through a table of the top 8 significand bits of every
// binade in range: an entry is the bin of its whole interval, or -1 where a step of the bin lies
// inside it (about steps / 256 of the values), which LogBins then settles.
class LogSlots {
 public:
  LogSlots(const LogBins& lb, int bins, int emin, int emax) : lb_(lb), bins_(bins) {
    emin = std::max(emin, -126);
    emax = std::min(emax, 127);
    if (emax < emin) return;
    off_ = static_cast<uint32_t>(emin + 127) << 8;
    table_.resize(static_cast<size_t>(emax - emin + 1) << 8);
    for (size_t k = 0; k < table_.size(); ++k) {
      const uint32_t u0 = (off_ + static_cast<uint32_t>(k)) << 15, u1 = u0 + (1u << 15) - 1;
      const int b0 = slot(lb.bin(u0)), b1 = slot(lb.bin(u1));
      table_[k] = b0 == b1 ? static_cast<int16_t>(b0) : int16_t{-1};
    }
  }
  void fill(const float* v, int64_t n, int32_t* idx) const {
    const uint32_t size = static_cast<uint32_t>(table_.size());
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = float_bits(v[i]) & 0x7FFFFFFF;
      const uint32_t k = (u >> 15) - off_;
      const int t = k < size ? table_[k] : -1;
      idx[i] = t >= 0 ? t : settle(u);
    }
  }

 private:
  int slot(int b) const { return b < 0 ? bins_ + kBelow : b >= bins_ ? bins_ + kAbove : b; }
  int settle(uint32_t u) const {
    if (u >= 0x7F800000) return bins_ + kNonfinite;
    if (u == 0) return bins_ + kZeroOrSkip;
    return slot(lb_.bin(u));
  }
  const LogBins& lb_;
  int bins_;
  uint32_t off_ = 0;
  std::vector<int16_t> table_;
};

// A linear histogram's slot of each float through tables of the top 8 significand bits of every
// binade of either sign from 2^(e_hi - 40) to the range's top binade: histogram()'s double
// arithmetic is monotone in the value, so an entry whose interval's ends share a slot holds it,
// and the others (-1: a bin edge inside) and values outside the tables take the formula.
// Magnitudes below the tables share the slot of the tables' least value when that equals the
// slot of zero, which monotonicity then forces on everything between.
class LinearSlots {
 public:
  LinearSlots(double lo, double hi, int bins)
      : lo_(lo), hi_(hi), scale_(bins / (hi - lo)), bins_(bins) {
    const double top = std::max(std::fabs(lo), std::fabs(hi));
    int e_hi = std::ilogb(top);
    e_hi = std::clamp(e_hi, -126, 127);
    const int e_lo = std::max(-126, e_hi - 40);
    off_ = static_cast<uint32_t>(e_lo + 127) << 8;
    const size_t size = static_cast<size_t>(e_hi - e_lo + 1) << 8;
    for (int sign = 0; sign < 2; ++sign) {
      std::vector<int16_t>& t = table_[sign];
      t.resize(size);
      for (size_t k = 0; k < size; ++k) {
        const uint32_t u0 = (off_ + static_cast<uint32_t>(k)) << 15, u1 = u0 + (1u << 15) - 1;
        const int b0 = reference(u0 | (sign << 31)), b1 = reference(u1 | (sign << 31));
        t[k] = b0 == b1 ? static_cast<int16_t>(b0) : int16_t{-1};
      }
      const int z = reference(static_cast<uint32_t>(sign) << 31);
      tiny_[sign] = z == reference((off_ << 15) | (static_cast<uint32_t>(sign) << 31)) ? z : -1;
    }
  }
  int reference(uint32_t bits) const {
    float f;
    std::memcpy(&f, &bits, 4);
    const double x = f;
    if ((bits & 0x7FFFFFFF) >= 0x7F800000) return bins_ + kNonfinite;
    if (x < lo_) return bins_ + kBelow;
    if (x > hi_) return bins_ + kAbove;
    int64_t b = static_cast<int64_t>((x - lo_) * scale_);
    if (b >= bins_) b = bins_ - 1;
    return static_cast<int>(b);
  }
  int slot(uint32_t bits) const {
    const uint32_t sign = bits >> 31, u = bits & 0x7FFFFFFF;
    const std::vector<int16_t>& t = table_[sign];
    const uint32_t k = (u >> 15) - off_;
    int r = -1;
    if (k < t.size()) {
      r = t[k];
    } else if (u < (off_ << 15)) {
      r = tiny_[sign];
    }
    return r >= 0 ? r : reference(bits);
  }
  void fill(const float* v, int64_t n, int32_t* idx) const {
    for (int64_t i = 0; i < n; ++i) idx[i] = slot(float_bits(v[i]));
  }

 private:
  double lo_, hi_, scale_;
  int bins_;
  uint32_t off_ = 0;
  std::vector<int16_t> table_[2];
  int tiny_[2] = {-1, -1};
};

Histogram from_slots(const std::vector<uint64_t>& c, double lo, double hi, int bins, bool log_x,
                     bool skip_is_zero) {
  static_assert(kBelow == 0 && kAbove == 1 && kNonfinite == 2 && kZeroOrSkip == 3,
                "the slots follow the bins in histogram_from_counts' order");
  Histogram h = histogram_from_counts(c.data(), lo, hi, bins, log_x);
  if (!skip_is_zero) h.zeros = 0;
  return h;
}

ExponentHistogram trimmed(std::vector<uint64_t> counts, uint64_t zeros, uint64_t nonfinite) {
  ExponentHistogram h;
  h.zeros = zeros;
  h.nonfinite = nonfinite;
  h.counts = std::move(counts);
  h.emin = -149;
  h.emax = -149 + static_cast<int>(h.counts.size()) - 1;
  trim_exponents(h);
  return h;
}

// tile_map()'s figures for tiles that are consecutive runs of tc elements of the storage (one
// tile row, no permutation, tc dividing the rows): the same per-tile sums in the same order,
// eight tiles at a time so that their additions do not wait on each other.
struct TileRuns {
  detail::CastPlan p;
  detail::KernelParams kp;
  const void* scale = nullptr;
  int64_t tc = 0;
  static std::optional<TileRuns> make(const CastResult& a, int64_t n) {
    if (!a.dtype.scaled() || a.dtype.tensor_scaled() || a.mode != CastMode::Actual ||
        !family_traits(a.dtype.family()).grammar || a.options.flatten || !a.scale)
      return std::nullopt;
    TileRuns t{detail::make_plan(a.shape, a.dtype, a.options), {}, a.scale.data(), 0};
    const detail::CastPlan& p = t.p;
    if (p.permuted || p.tr != 1 || p.C % p.tc != 0 || HostViews::kChunk % p.tc != 0 ||
        p.numel() != n || p.groups() * p.tc != n)
      return std::nullopt;
    t.kp = detail::kernel_params(p);
    if (p.multiscale) {
      if (!a.tenscale) return std::nullopt;
      t.kp.tensor_scale = scalar::decode_value(
          detail::load_code(a.tenscale.data(), p.second_dtype, 0, t.kp.second), t.kp.second);
    }
    t.tc = p.tc;
    return t;
  }
  TileMap layout() const {
    TileMap m;
    m.rows = p.B * p.gr;
    m.cols = p.gc;
    m.tile_rows = p.tr;
    m.tile_cols = p.tc;
    const size_t g = static_cast<size_t>(p.groups());
    m.scale_code.resize(g);
    m.scale_value.resize(g);
    m.absmax.resize(g);
    m.snr_db.resize(g);
    return m;
  }
  // Tiles [k0, k1).
  void run(const float* xp, const float* qp, int64_t k0, int64_t k1, TileMap& m) const {
    constexpr int kW = 8;
    for (int64_t k = k0; k < k1; k += kW) {
      const int w = static_cast<int>(std::min<int64_t>(kW, k1 - k));
      double amax[kW] = {}, sx2[kW] = {}, se2[kW] = {};
      for (int64_t j = 0; j < tc; ++j)
        for (int t = 0; t < w; ++t) {
          const int64_t e = (k + t) * tc + j;
          const float xf = xp[e];
          // A non-finite input adds +0, which leaves these non-negative sums as they are.
          const bool ok = (float_bits(xf) & 0x7FFFFFFF) < 0x7F800000;
          const double xv = ok ? static_cast<double>(xf) : 0.0;
          const double d = ok ? static_cast<double>(qp[e]) - xv : 0.0;
          amax[t] = std::max(amax[t], std::fabs(xv));
          sx2[t] += xv * xv;
          se2[t] += d * d;
        }
      for (int t = 0; t < w; ++t) {
        const size_t kk = static_cast<size_t>(k + t);
        const uint32_t code = detail::load_code(scale, p.scale_dtype, k + t, kp.scale);
        const detail::GroupScale gs = detail::scale_from_codes(kp, code, 0);
        m.scale_code[kk] = code;
        m.scale_value[kk] =
            gs.nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(gs.s);
        m.absmax[kk] = static_cast<float>(amax[t]);
        m.snr_db[kk] = se2[t] > 0 ? static_cast<float>(10 * std::log10(sx2[t] / se2[t]))
                                  : std::numeric_limits<float>::infinity();
      }
    }
  }
};

}  // namespace

FirstPass HostViews::first(const MaskImage& m, JobControl*) const {
  struct Part {
    StatLanes s;
    std::vector<uint64_t> eo, ec;
    int64_t cell_row0 = 0;
    std::vector<int64_t> cells;  // the cell rows this chunk touches, from cell_row0
  };
  const int64_t nc = chunks();
  std::vector<Part> parts(static_cast<size_t>(nc));
  const float* xp = x.ptr<float>();
  const float* qp = q.ptr<float>();
  const uint8_t* mp = has_mask() ? r.mask.ptr<uint8_t>() : nullptr;
  const bool cells = m.total > 0 && view.contiguous();
  detail::parallel_for(nc, 1, 0, nullptr, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      Part& p = parts[static_cast<size_t>(c)];
      const int64_t b = c * kChunk, e = std::min(n(), b + kChunk);
      stats_block(xp + b, qp + b, e - b, p.s);
      p.eo.assign(kExpSlots, 0);
      p.ec.assign(kExpSlots, 0);
      {
        // Two copies per tensor: a Gaussian's values fall in a few binades.
        uint32_t ex[4][kExpSlots] = {};
        int64_t i = b;
        if (known) {
          for (; i + 2 <= e; i += 2) {
            ++ex[2][exp_slot(float_bits(qp[i]))];
            ++ex[3][exp_slot(float_bits(qp[i + 1]))];
          }
        } else {
          for (; i + 2 <= e; i += 2) {
            ++ex[0][exp_slot(float_bits(xp[i]))];
            ++ex[1][exp_slot(float_bits(xp[i + 1]))];
            ++ex[2][exp_slot(float_bits(qp[i]))];
            ++ex[3][exp_slot(float_bits(qp[i + 1]))];
          }
        }
        for (; i < e; ++i)
          ++ex[0][exp_slot(float_bits(xp[i]))], ++ex[2][exp_slot(float_bits(qp[i]))];
        for (int k = 0; k < kExpSlots; ++k) {
          p.eo[static_cast<size_t>(k)] = uint64_t{ex[0][k]} + ex[1][k];
          p.ec[static_cast<size_t>(k)] = uint64_t{ex[2][k]} + ex[3][k];
        }
      }
      if (!cells) continue;
      // Per-cell counts of the chunk's elements, a row segment at a time.
      const int64_t r0 = b / m.cols, r1 = (e - 1) / m.cols;
      p.cell_row0 = r0 / m.cell_rows;
      p.cells.assign(static_cast<size_t>((r1 / m.cell_rows - p.cell_row0 + 1) * m.out_cols), 0);
      for (int64_t i = b; i < e;) {
        const int64_t row = i / m.cols, col = i % m.cols;
        const int64_t stop = std::min(e, (row + 1) * m.cols);
        int64_t* hits = p.cells.data() + (row / m.cell_rows - p.cell_row0) * m.out_cols;
        for (int64_t j = col; i < stop;) {
          const int64_t cell = j / m.cell_cols;
          const int64_t end = std::min(stop, i + ((cell + 1) * m.cell_cols - j));
          int64_t k = 0;
          if (mp) {
            for (int64_t t = i; t < end; ++t) k += mp[t] != 0;
          } else {
            for (int64_t t = i; t < end; ++t) {
              const uint32_t u = float_bits(xp[t]) & 0x7FFFFFFF;
              k += (u - 1 < 0x7F7FFFFFu) & (qp[t] == 0);  // finite, non-zero x cast to zero
            }
          }
          hits[cell] += k;
          j += end - i;
          i = end;
        }
      }
    }
  });
  FirstPass out;
  int64_t count = 0, nin = 0, nout = 0, zout = 0;
  double sx2 = 0, se2 = 0, se = 0, maxe = 0;
  float amax = 0;
  std::vector<uint64_t> eo(kExpSlots, 0), ec(kExpSlots, 0);
  if (cells) out.cells.assign(static_cast<size_t>(m.out_rows * m.out_cols), 0);
  for (const Part& p : parts) {
    count += p.s.count, nin += p.s.nin, nout += p.s.nout, zout += p.s.zout;
    for (int l = 0; l < 4; ++l) {
      sx2 += p.s.sx2[l], se2 += p.s.se2[l], se += p.s.se[l];
      maxe = std::max(maxe, p.s.maxe[l]);
    }
    amax = std::max(amax, p.s.amax);
    for (size_t k = 0; k < kExpSlots; ++k) eo[k] += p.eo[k], ec[k] += p.ec[k];
    for (size_t k = 0; k < p.cells.size(); ++k)
      out.cells[static_cast<size_t>(p.cell_row0 * m.out_cols) + k] += p.cells[k];
  }
  if (m.total > 0 && !view.contiguous())
    out.cells = mask_cells(m, view, [&](int64_t t) -> int64_t {
      if (mp) return mp[t] != 0;
      const uint32_t u = float_bits(xp[t]) & 0x7FFFFFFF;
      return (u - 1 < 0x7F7FFFFFu) & (qp[t] == 0);
    });
  Stats& s = out.stats;
  s.count = count, s.nonfinite_in = nin, s.nonfinite_out = nout, s.zeros_out = zout;
  s.clipped = r.counts.clipped;
  if (count) {
    s.mse = se2 / count;
    s.mean_err = se / count;
    s.signal_power = sx2 / count;
  }
  s.max_abs_err = maxe;
  s.snr_db = se2 > 0 ? 10.0 * std::log10(sx2 / se2) : std::numeric_limits<double>::infinity();
  out.absmax = amax;
  auto split = [](std::vector<uint64_t> c) {
    const uint64_t nf = c[277], z = c[278];
    c.resize(277);
    return trimmed(std::move(c), z, nf);
  };
  out.eo = known ? known->eo : split(std::move(eo));
  out.ec = split(std::move(ec));
  return out;
}

SecondPass HostViews::second(const Ranges& g, JobControl*) const {
  const int bins = g.bins;
  const LogBins lb(g.lo, g.hi, bins, static_cast<int>(g.lo), static_cast<int>(g.hi) - 1);
  const LogSlots ls(lb, bins, static_cast<int>(g.lo), static_cast<int>(g.hi) - 1);
  const LinearSlots vsl(-g.lim, g.lim, bins), esl(-g.elim, g.elim, bins);
  const bool value_known = known && known->value.lo == -g.lim && known->value.hi == g.lim &&
                           known->value.counts.size() == static_cast<size_t>(bins);
  const bool log_known = known && known->log.lo == g.lo && known->log.hi == g.hi &&
                         known->log.counts.size() == static_cast<size_t>(bins);
  const float* xp = x.ptr<float>();
  const float* qp = q.ptr<float>();
  const int64_t nc = chunks();
  const size_t width = static_cast<size_t>(bins + kSlots);
  // Five count arrays per chunk: values of x and q, log2 of x and q, errors.
  std::vector<std::vector<uint64_t>> parts(static_cast<size_t>(nc));
  // The tile map from the same chunks while they are in cache.
  const std::optional<TileRuns> runs = tiled ? TileRuns::make(r, n()) : std::nullopt;
  TileMap tm = runs ? runs->layout() : TileMap{};
  detail::parallel_for(nc, 1, 0, nullptr, [&](int64_t cb, int64_t ce) {
    std::vector<int32_t> idx(static_cast<size_t>(5 * kBlock));
    std::vector<uint32_t> lanes;
    for (int64_t c = cb; c < ce; ++c) {
      std::vector<uint64_t>& p = parts[static_cast<size_t>(c)];
      p.assign(5 * width, 0);
      lanes.assign(5 * 4 * width, 0);  // a chunk's counts fit 32 bits
      const int64_t b = c * kChunk, e = std::min(n(), b + kChunk);
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t len = std::min(kBlock, e - i);
        int32_t* ix = idx.data();
        if (!value_known) vsl.fill(xp + i, len, ix);
        vsl.fill(qp + i, len, ix + kBlock);
        if (!log_known) ls.fill(xp + i, len, ix + 2 * kBlock);
        ls.fill(qp + i, len, ix + 3 * kBlock);
        for (int64_t k = 0; k < len; ++k) {
          // error_histogram(): q - x in float, over the finite inputs.
          const uint32_t ux = float_bits(xp[i + k]);
          ix[4 * kBlock + k] = (ux & 0x7FFFFFFF) < 0x7F800000
                                   ? esl.slot(float_bits(qp[i + k] - xp[i + k]))
                                   : bins + kZeroOrSkip;
        }
        // Four copies of each count array, so that runs of one bin (most values of a
        // Gaussian fall in a few) do not wait on each other's stores.
        for (int h = 0; h < 5; ++h) {
          if ((h == 0 && value_known) || (h == 2 && log_known)) continue;
          uint32_t* cnt = lanes.data() + h * 4 * width;
          const int32_t* hi = ix + h * kBlock;
          int64_t k = 0;
          for (; k + 4 <= len; k += 4) {
            ++cnt[hi[k]];
            ++cnt[width + hi[k + 1]];
            ++cnt[2 * width + hi[k + 2]];
            ++cnt[3 * width + hi[k + 3]];
          }
          for (; k < len; ++k) ++cnt[hi[k]];
        }
      }
      if (runs) runs->run(xp, qp, b / runs->tc, e / runs->tc, tm);
      for (int h = 0; h < 5; ++h)
        for (size_t j = 0; j < width; ++j) {
          const uint32_t* cnt = lanes.data() + h * 4 * width;
          p[h * width + j] =
              uint64_t{cnt[j]} + cnt[width + j] + cnt[2 * width + j] + cnt[3 * width + j];
        }
    }
  });
  std::vector<uint64_t> total(5 * width, 0);
  for (const auto& p : parts)
    for (size_t k = 0; k < total.size(); ++k) total[k] += p[k];
  auto slice = [&](int h) {
    return std::vector<uint64_t>(total.begin() + h * width, total.begin() + (h + 1) * width);
  };
  if (runs) fused = std::move(tm);
  SecondPass out;
  out.vo = value_known ? known->value : from_slots(slice(0), -g.lim, g.lim, bins, false, false);
  out.vc = from_slots(slice(1), -g.lim, g.lim, bins, false, false);
  out.lo = log_known ? known->log : from_slots(slice(2), g.lo, g.hi, bins, true, true);
  out.lc = from_slots(slice(3), g.lo, g.hi, bins, true, true);
  out.err = from_slots(slice(4), -g.elim, g.elim, bins, false, false);
  return out;
}

}  // namespace castscope::widgets
