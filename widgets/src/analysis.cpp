#include "castscope/widgets/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "parallel.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace castscope::widgets {

std::pair<int64_t, int64_t> fold_2d(const Shape& s) {
  if (s.empty()) return {1, 1};
  const int64_t cols = s.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) rows *= s[i];
  return {rows, cols};
}

std::pair<double, double> representable_log2(const NumberSpec& n) {
  if (n.is_int() || n.is_uint()) {
    const double hi = static_cast<double>(std::max<int64_t>(n.int_max(), 1));
    return {0.0, std::log2(hi)};
  }
  return {std::log2(n.min_subnormal()), std::log2(n.max())};
}

namespace {

// The cell grid of a mask image, without its counts.
MaskImage mask_layout(const Shape& shape, int max_side, std::string what) {
  MaskImage m;
  m.what = std::move(what);
  auto [rows, cols] = fold_2d(shape);
  m.rows = rows;
  m.cols = cols;
  if (rows <= 0 || cols <= 0) return m;
  max_side = std::max(1, max_side);
  m.cell_rows = (rows + max_side - 1) / max_side;
  m.cell_cols = (cols + max_side - 1) / max_side;
  m.out_rows = (rows + m.cell_rows - 1) / m.cell_rows;
  m.out_cols = (cols + m.cell_cols - 1) / m.cell_cols;
  m.total = rows * cols;
  return m;
}

// Fractions from per-cell counts of set elements (cells at the edges hold fewer elements).
void finish_mask(MaskImage& m, const std::vector<int64_t>& hits) {
  m.fraction.assign(hits.size(), 0.f);
  m.set = 0;
  for (size_t k = 0; k < hits.size(); ++k) {
    const int64_t i = static_cast<int64_t>(k) / m.out_cols,
                  j = static_cast<int64_t>(k) % m.out_cols;
    const int64_t n = (std::min(m.rows, (i + 1) * m.cell_rows) - i * m.cell_rows) *
                      (std::min(m.cols, (j + 1) * m.cell_cols) - j * m.cell_cols);
    m.fraction[k] = n ? static_cast<float>(hits[k]) / static_cast<float>(n) : 0.f;
    m.set += hits[k];
  }
}

// Per-cell counts of the elements i (row-major over the 2-D view) for which on(i) holds.
template <class On>
std::vector<int64_t> count_cells(const MaskImage& m, On&& on) {
  std::vector<int64_t> hits(static_cast<size_t>(m.out_rows * m.out_cols), 0);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c)
      hits[static_cast<size_t>((r / m.cell_rows) * m.out_cols + c / m.cell_cols)] +=
          on(r * m.cols + c);
  return hits;
}

}  // namespace

MaskImage mask_image(const uint8_t* set, const Shape& shape, int max_side, std::string what) {
  MaskImage m = mask_layout(shape, max_side, std::move(what));
  if (m.total) finish_mask(m, count_cells(m, [&](int64_t i) { return set[i] != 0; }));
  return m;
}

void retain_freed_memory() {
#if defined(__GLIBC__)
  // Blocks below the mmap threshold come from the heap, which is trimmed only past the trim
  // threshold; tensors larger than 32 MB still go straight back to the system.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

gpu::DeviceTensor DeviceInput::get(const Tensor& x) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!device_ || host_.data() != x.data() || host_.shape() != x.shape() ||
      host_.dtype() != x.dtype()) {
    device_ = gpu::DeviceTensor();  // the old copy's memory goes back before the new one is taken
    device_ = gpu::DeviceTensor::upload(x);
    host_ = x;
  }
  return device_;
}

struct InputViews {
  double absmax = 0;
  ExponentHistogram eo;
  Histogram value, log;  // value_orig and log_orig, each over the range it records
};

namespace {
bool same_tensor(const Tensor& a, const Tensor& b) {
  return a && b && a.data() == b.data() && a.shape() == b.shape() && a.dtype() == b.dtype();
}
}  // namespace

std::shared_ptr<const InputViews> DeviceInput::input_views(const Tensor& x) {
  std::lock_guard<std::mutex> lock(mu_);
  return same_tensor(views_key_, x) ? views_ : nullptr;
}

void DeviceInput::keep_input_views(const Tensor& x, std::shared_ptr<const InputViews> v) {
  std::lock_guard<std::mutex> lock(mu_);
  views_key_ = x;
  views_ = std::move(v);
}

Tensor values_block(const Analysis& a, int64_t r0, int64_t c0, int64_t h, int64_t w) {
  if (a.device_values) return a.device_values.download_block(r0, c0, h, w);
  if (!a.values) throw Error("the analysis holds no cast values");
  const auto [rows, cols] = fold_2d(a.values.shape());
  if (r0 < 0 || c0 < 0 || h < 0 || w < 0 || r0 >= rows || c0 >= cols)
    throw Error("block at (" + std::to_string(r0) + ", " + std::to_string(c0) +
                ") is outside the " + std::to_string(rows) + " x " + std::to_string(cols) +
                " values");
  const int64_t bh = std::min(h, rows - r0), bw = std::min(w, cols - c0);
  Tensor t = Tensor::empty(DType::F32, {bh, bw});
  const float* src = a.values.ptr<float>();
  float* dst = t.mutable_ptr<float>();
  for (int64_t r = 0; r < bh; ++r) std::copy_n(src + (r0 + r) * cols + c0, bw, dst + r * bw);
  return t;
}

namespace {

// Spreads a trimmed exponent histogram over [lo, hi].
std::vector<uint64_t> align(const ExponentHistogram& h, int lo, int hi) {
  std::vector<uint64_t> out(static_cast<size_t>(hi - lo + 1), 0);
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const int e = h.emin + static_cast<int>(i);
    if (e >= lo && e <= hi) out[static_cast<size_t>(e - lo)] += h.counts[i];
  }
  return out;
}

bool any_count(const ExponentHistogram& h) {
  for (uint64_t c : h.counts)
    if (c) return true;
  return false;
}

bool tiled_dtype(const DataType& d) {
  return (d.family() == Family::Standard || d.family() == Family::Codebook) && d.scaled() &&
         !d.tensor_scaled();
}

// A tiled cast's sparsity mask (host or device tensor), when it has one per element.
template <class T>
bool sparsity_mask(bool tiled, const T& mask, int64_t n) {
  return tiled && mask && mask.numel() == n && mask.dtype() == DType::Bool;
}

// What the first pass over the data gives: the statistics, the input's absmax, both exponent
// histograms and the mask image's per-cell counts.
struct FirstPass {
  Stats stats;
  double absmax = 0;
  ExponentHistogram eo, ec;
  std::vector<int64_t> cells;
};
// The second pass: histograms whose ranges the first one fixed.
struct SecondPass {
  Histogram vo, vc, lo, lc, err;
};
struct Ranges {
  double lim = 1, lo = 0, hi = 1, elim = 1;
  int bins = 8;
};

inline uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CASTSCOPE_VIEW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CASTSCOPE_VIEW_CLONES
#endif

// Slots past a histogram's bins in the per-chunk count arrays.
enum Slot { kBelow = 0, kAbove = 1, kNonfinite = 2, kZeroOrSkip = 3, kSlots = 4 };
constexpr int kExpSlots = 279;  // floor(log2|v|) + 149 for -149..127, then non-finite, zero
constexpr int64_t kBlock = 2048;

// The first pass's sums of a chunk, in four lanes so that the additions do not wait on each
// other (the chunk's result, and so the analysis, does not depend on the thread count).
struct StatLanes {
  double sx2[4] = {}, se2[4] = {}, se[4] = {}, maxe[4] = {};
  int64_t count = 0, nin = 0, nout = 0, zout = 0;
  float amax = 0;
};

// compute_stats' quantities, branch-free: a pair outside the finite inputs and outputs adds 0.
CASTSCOPE_VIEW_CLONES void stats_block(const float* x, const float* q, int64_t n, StatLanes& s) {
  for (int64_t i0 = 0; i0 < n; i0 += 4) {
    for (int l = 0; l < 4 && i0 + l < n; ++l) {
      const int64_t i = i0 + l;
      const float xf = x[i], qf = q[i];
      const bool fx = (float_bits(xf) & 0x7FFFFFFF) < 0x7F800000;
      const bool fq = (float_bits(qf) & 0x7FFFFFFF) < 0x7F800000;
      const bool ok = fx && fq;
      const double xv = ok ? static_cast<double>(xf) : 0.0, qv = ok ? static_cast<double>(qf) : 0.0;
      const double d = qv - xv;
      s.sx2[l] += xv * xv;
      s.se2[l] += d * d;
      s.se[l] += d;
      s.maxe[l] = std::max(s.maxe[l], std::fabs(d));
      s.count += ok;
      s.nin += !fx;
      s.nout += fx && !fq;
      s.zout += ok && qv == 0 && xv != 0;
      s.amax = std::max(s.amax, fx ? std::fabs(xf) : 0.f);
    }
  }
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
  Histogram h;
  h.lo = lo;
  h.hi = hi;
  h.log_x = log_x;
  h.counts.assign(c.begin(), c.begin() + bins);
  h.below = c[static_cast<size_t>(bins + kBelow)];
  h.above = c[static_cast<size_t>(bins + kAbove)];
  h.nonfinite = c[static_cast<size_t>(bins + kNonfinite)];
  if (skip_is_zero) h.zeros = c[static_cast<size_t>(bins + kZeroOrSkip)];
  return h;
}

ExponentHistogram trimmed(std::vector<uint64_t> counts, uint64_t zeros, uint64_t nonfinite) {
  // As exponent_histogram() trims: to the occupied binades.
  ExponentHistogram h;
  h.zeros = zeros;
  h.nonfinite = nonfinite;
  int lo = 0, hi = static_cast<int>(counts.size()) - 1;
  while (lo < hi && counts[lo] == 0) ++lo;
  while (hi > lo && counts[hi] == 0) --hi;
  h.counts.assign(counts.begin() + lo, counts.begin() + hi + 1);
  h.emin = -149 + lo;
  h.emax = -149 + hi;
  return h;
}

// The views' inputs on the host: the float32 input, its cast values and the cast result. Every
// view comes from two passes over the input and its cast, split over the threads in chunks whose
// partial results are merged in chunk order, so the sums do not depend on the thread count.
struct HostViews {
  Tensor x, q;
  CastResult r;
  bool tiled = false;
  // The input's own views from an earlier analysis of the same tensor: the passes skip them.
  const InputViews* known = nullptr;
  int64_t n() const { return x.numel(); }
  static constexpr int64_t kChunk = 1 << 16;
  int64_t chunks() const { return (n() + kChunk - 1) / kChunk; }

  FirstPass first(const MaskImage& m, JobControl* job) const {
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
    const bool cells = m.total > 0;
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

  SecondPass second(const Ranges& g, JobControl* job) const {
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
    SecondPass out;
    out.vo = value_known ? known->value : from_slots(slice(0), -g.lim, g.lim, bins, false, false);
    out.vc = from_slots(slice(1), -g.lim, g.lim, bins, false, false);
    out.lo = log_known ? known->log : from_slots(slice(2), g.lo, g.hi, bins, true, true);
    out.lc = from_slots(slice(3), g.lo, g.hi, bins, true, true);
    out.err = from_slots(slice(4), -g.elim, g.elim, bins, false, false);
    return out;
  }
  TileMap tiles() const { return tile_map(x, q, r); }
  bool has_mask() const { return sparsity_mask(tiled, r.mask, n()); }
};

// The same views from tensors left in device memory: only the views come back to the host.
struct DeviceViews {
  gpu::DeviceTensor x, q;
  gpu::DeviceCastResult r;
  bool tiled = false;
  Stats stats() const { return gpu::compute_stats(x, q, r.counts.clipped); }
  double absmax() const { return gpu::absmax(x); }
  Histogram values(bool cast, double lo, double hi, int bins, bool log_x) const {
    return gpu::histogram(cast ? q : x, lo, hi, bins, log_x);
  }
  ExponentHistogram exponents(bool cast) const { return gpu::exponent_histogram(cast ? q : x); }
  Histogram errors(double lo, double hi, int bins) const {
    return gpu::error_histogram(x, q, lo, hi, bins);
  }
  TileMap tiles() const { return gpu::tile_map(x, q, r); }
  bool has_mask() const { return sparsity_mask(tiled, r.mask, x.numel()); }
  std::vector<int64_t> cells(const MaskImage& m) const {
    return gpu::cell_counts(x, q, has_mask() ? &r.mask : nullptr, m.cols, m.cell_rows, m.cell_cols,
                            m.out_rows, m.out_cols);
  }
  FirstPass first(const MaskImage& m, JobControl*) const {
    FirstPass f;
    f.stats = stats();
    f.absmax = absmax();
    f.eo = exponents(false);
    f.ec = exponents(true);
    if (m.total) f.cells = cells(m);
    return f;
  }
  SecondPass second(const Ranges& g, JobControl*) const {
    SecondPass s;
    s.vo = values(false, -g.lim, g.lim, g.bins, false);
    s.vc = values(true, -g.lim, g.lim, g.bins, false);
    s.lo = values(false, g.lo, g.hi, g.bins, true);
    s.lc = values(true, g.lo, g.hi, g.bins, true);
    s.err = errors(-g.elim, g.elim, g.bins);
    return s;
  }
};

// Every view after the cast, from host or device data alike: the metrics first (and handed to
// on_metrics), then the histograms, the tile map and the mask.
template <class Views>
void compute_views(Analysis& a, const Views& v, const AnalysisOptions& ao, JobControl* job,
                   ExponentHistogram* eo_out = nullptr) {
  const DataType& d = a.dtype;
  std::string what = "non-zero values cast to zero";
  if (v.has_mask()) {
    const TileSpec* sp = d.sparse_tile();
    what = "kept by " + std::to_string(sp ? sp->n : 0) + ":" + std::to_string(sp ? sp->m : 0) +
           " sparsity";
  }
  a.mask = mask_layout(a.shape, ao.mask_max_side, what);
  FirstPass f = v.first(a.mask, job);
  a.stats = f.stats;
  a.absmax = f.absmax;
  if (ao.on_metrics) ao.on_metrics(a);
  if (job) job->check();

  const ExponentHistogram& eo = f.eo;
  const ExponentHistogram& ec = f.ec;
  int lo = 0, hi = 0;
  if (any_count(eo) || any_count(ec)) {
    lo = any_count(eo) ? eo.emin : ec.emin;
    hi = any_count(eo) ? eo.emax : ec.emax;
    if (any_count(ec)) lo = std::min(lo, ec.emin), hi = std::max(hi, ec.emax);
  }
  a.exp_lo = lo;
  a.exp_hi = hi;
  a.exp_orig = align(eo, lo, hi);
  a.exp_cast = align(ec, lo, hi);
  a.exp_zero_orig = eo.zeros;
  a.exp_zero_cast = ec.zeros;
  if (eo_out) *eo_out = eo;

  Ranges g;
  g.lim = a.absmax > 0 ? a.absmax * 1.02 : 1.0;
  g.bins = std::max(8, ao.bins);
  g.lo = lo;
  g.hi = hi + 1.0;
  // The largest error over finite pairs is the statistics' max_abs_err.
  const double emax = a.stats.max_abs_err;
  g.elim = emax > 0 ? emax * 1.02 : 1.0;
  SecondPass s = v.second(g, job);
  a.value_orig = std::move(s.vo);
  a.value_cast = std::move(s.vc);
  a.log_orig = std::move(s.lo);
  a.log_cast = std::move(s.lc);
  a.error = std::move(s.err);
  if (job) job->check();

  if (v.tiled) {
    try {
      a.tiles = v.tiles();
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      a.tiles_note = e.what();
    }
  } else if (d.family() == Family::GGML) {
    a.tiles_note = "ggml block scales live inside the GGUF blocks; no tile map";
  } else if (d.family() != Family::Standard) {
    a.tiles_note = "TCFP block scales are internal to the TCFP kernels; no tile map";
  } else if (!d.scaled()) {
    a.tiles_note = "unscaled datatype: no tile scales";
  } else {
    a.tiles_note = "one scale for the whole tensor: no tile map";
  }
  if (a.mask.total) finish_mask(a.mask, f.cells);
}

// The span of magnitudes the target keeps, placed at the tensor absmax for scaled datatypes.
void representable_range(Analysis& a) {
  const DataType& d = a.dtype;
  NumberSpec target = d.number();
  if (d.family() != Family::Standard && d.family() != Family::Codebook &&
      d.family() != Family::GGML)
    target = NumberSpec::parse("e4m3fn");  // TCFP's element format
  auto [rlo, rhi] = representable_log2(target);
  if (d.scaled() || d.family() != Family::Standard) {
    const double span = rhi - rlo;
    rhi = a.absmax > 0 ? std::log2(a.absmax) : rhi;
    rlo = rhi - span;
    a.rep_note = "range of one scale block, placed at the tensor absmax";
  } else {
    a.rep_note = "range of " + target.name();
  }
  a.rep_lo = rlo;
  a.rep_hi = rhi;
}

// Device casts cover the standard and TCFP families; a codebook's tile map (its mappings) and
// ggml's reference quantizer live on the host, and rotations wrap the host cast.
bool device_views_possible(const DataType& d, const CastOptions& o) {
  return o.device != Device::CPU && !o.rotate.enabled() && d.family() != Family::Codebook &&
         d.family() != Family::GGML;
}

}  // namespace

std::shared_ptr<const Analysis> analyze(const Tensor& x_in, const DataType& dtype,
                                        CastOptions options, const std::string& name,
                                        const AnalysisOptions& ao, JobControl* job,
                                        DeviceInput* input) {
  if (!x_in || x_in.numel() == 0)
    throw Error("nothing to cast: the tensor '" + name + "' is empty");
  if (!dtype_is_float(x_in.dtype()))
    throw Error("tensor '" + name + "' has dtype " + std::string(dtype_name(x_in.dtype())) +
                "; only floating-point tensors can be cast");
  auto a = std::make_shared<Analysis>();
  a->tensor = name;
  a->shape = x_in.shape();
  a->dtype = dtype;
  const Tensor x = x_in.dtype() == DType::F32 ? x_in : x_in.to_f32();
  const bool tiled = tiled_dtype(dtype);
  options.mode = tiled ? CastMode::Actual : CastMode::Virtual;
  options.job = job;
  a->options = options;
  a->options.job = nullptr;
  a->bits_per_value = dtype.bits_per_value(axis_length(options, x.shape()));
  a->axis = describe_axis(options, x.shape());
  if (ao.keep_values) a->input = x;

  // While the app's GPU context is still starting, the host finishes the views before it would
  // be up; the next update finds it running.
  const bool wait_for_gpu = options.device == Device::Auto && gpu_starting();
  if (ao.device && !wait_for_gpu && device_views_possible(dtype, options) && gpu::available()) {
    const Analysis before = *a;  // what the host path starts from if the device gives up midway
    try {
      DeviceViews v;
      v.tiled = tiled;
      v.x = input ? input->get(x) : gpu::DeviceTensor::upload(x);
      v.r = gpu::cast(v.x, dtype, options, true);
      v.q = v.r.values;
      if (job) job->check();
      a->backend = "cuda";
      compute_views(*a, v, ao, job);
      if (ao.keep_values) a->device_values = v.q;
      a->on_device = true;
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      // Bad requests fail on the host too, with the same message; anything else (no memory on
      // the device) leaves the host to finish the views.
      *a = before;
      a->device_note = e.what();
    }
  }
  if (!a->on_device) {
    HostViews v;
    v.tiled = tiled;
    v.x = x;
    v.r = cast(x, dtype, options);
    if (job) job->check();
    // The values of a tiled cast: a virtual cast of the standard family takes the CPU's fast
    // paths and gives upcast()'s bits (cast.hpp), at a fraction of the generic decode's cost.
    if (tiled && dtype.family() == Family::Standard) {
      CastOptions vo = options;
      vo.mode = CastMode::Virtual;
      v.q = cast(x, dtype, vo).values;
    } else {
      v.q = tiled ? upcast(v.r) : v.r.values;
    }
    a->backend = v.r.backend;
    const std::shared_ptr<const InputViews> known = input ? input->input_views(x_in) : nullptr;
    v.known = known.get();
    auto mine = std::make_shared<InputViews>();
    compute_views(*a, v, ao, job, &mine->eo);
    if (input) {
      mine->absmax = a->absmax;
      mine->value = a->value_orig;
      mine->log = a->log_orig;
      input->keep_input_views(x_in, std::move(mine));
    }
    if (ao.keep_values) a->values = v.q;
  }
  representable_range(*a);
  if (job) job->report(1.0);
  return a;
}

}  // namespace castscope::widgets
