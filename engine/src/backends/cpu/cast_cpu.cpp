// The CPU reference engine: every datatype, mode and scaling kind. Work is split over scaling
// groups (tiles); a group's statistics, scale and elements are processed back to back while the
// tile is in cache.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/cast_cpu.hpp"
#include "backends/cpu/fast_scaled.hpp"
#include "backends/cpu/fast_tile.hpp"
#include "core/group.hpp"
#include "core/parallel.hpp"

namespace castscope::cpu {
namespace {

using detail::CastPlan;
using detail::GroupScale;
using detail::GroupStats;
using detail::KernelParams;

struct Outputs {
  float* values = nullptr;  // virtual
  void* codes = nullptr;    // actual
  uint8_t* mask = nullptr;
  void* scale = nullptr;
  void* zero = nullptr;
  uint8_t* meta = nullptr;
};

struct Counts {
  std::atomic<int64_t> clipped{0}, nonfinite{0}, pruned{0};
};

template <class T>
bool finite(T v) {
  return v - v == 0;
}

// Keep flags of one group under N:M sparsity: in every run of M values along the sparse
// direction keep the N largest magnitudes (ties: the lower index). Runs start at the tile edge.
template <class T>
int64_t sparsity_mask(const CastPlan& p, const T* x, int64_t base, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1, std::vector<uint8_t>& keep) {
  const int64_t w = c1 - c0;
  keep.assign(static_cast<size_t>((r1 - r0) * w), 1);
  if (p.sparse_dim < 0) return 0;
  int64_t pruned = 0;
  const int m = p.sp_m, n = p.sp_n;
  auto mag = [&](int64_t i, int64_t j) {
    T v = x[base + i * p.C + j];
    double a = std::fabs(static_cast<double>(v));
    return a != a ? std::numeric_limits<double>::infinity() : a;  // NaN counts as largest
  };
  int64_t idx_i[256], idx_j[256];
  auto run = [&](int cnt) {
    // Selection of the n largest among cnt candidates (cnt <= 256).
    bool chosen[256] = {false};
    for (int k = 0; k < n && k < cnt; ++k) {
      int best = -1;
      double bv = -1;
      for (int q = 0; q < cnt; ++q) {
        if (chosen[q]) continue;
        double a = mag(idx_i[q], idx_j[q]);
        if (a > bv) {
          bv = a;
          best = q;
        }
      }
      chosen[best] = true;
    }
    for (int q = 0; q < cnt; ++q)
      if (!chosen[q]) {
        keep[static_cast<size_t>((idx_i[q] - r0) * w + (idx_j[q] - c0))] = 0;
        ++pruned;
      }
  };
  // Groups of m along the sparse dimension: along each row (sparse_dim 1) or each column.
  const bool rows = p.sparse_dim == 1;
  const int64_t o0 = rows ? r0 : c0, o1 = rows ? r1 : c1, s0 = rows ? c0 : r0, s1 = rows ? c1 : r1;
  int64_t* along = rows ? idx_j : idx_i;
  int64_t* across = rows ? idx_i : idx_j;
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t g = s0; g < s1; g += m) {
      int cnt = 0;
      for (int64_t q = g; q < s1 && q < g + m; ++q, ++cnt) {
        across[cnt] = o;
        along[cnt] = q;
      }
      run(cnt);
    }
  return pruned;
}

template <class T>
class Engine {
 public:
  Engine(const CastPlan& p, const KernelParams& kp, const T* x, Outputs& out)
      : p_(p), kp_(kp), x_(x), out_(out) {
    fast_ = std::is_same_v<T, float> && p.sparse_dim < 0 && !p.sub && !p.multiscale &&
            (p.scale_is_exponent || !p.scaled) &&
            (p.scaled || p.opt.overflow == scalar::Overflow::Saturate);
    tp_ = fast::make_params(kp.data, kp.round, kp.seed);
    const size_t cb = dtype_size(p.code_dtype);
    scaled_ = std::is_same_v<T, float> && p.sparse_dim < 0 && !p.sub && fast::scaled_ok(kp) &&
              (!out.codes || cb <= 2);
    sp_ = fast::make_scaled_params(kp, static_cast<int>(cb));
    cp_ = fast::make_code_params(kp.data, cb);
    sc_ = fast::make_scale_choice(kp);
    bf16_ = fast_ && !p.scaled && fast::bf16_unscaled(tp_, cp_, out.codes != nullptr);
  }

  // Group g's rows [r0, r1) and columns [c0, c1) of its batch slice starting at element base.
  struct Bounds {
    int64_t base, r0, r1, c0, c1;
  };
  Bounds bounds(int64_t g) const {
    const int64_t per = p_.gr * p_.gc;
    const int64_t b = g / per, gi = (g % per) / p_.gc, gj = g % p_.gc;
    const int64_t r0 = gi * p_.tr, c0 = gj * p_.tc;
    return {b * p_.R * p_.C, r0, std::min(p_.R, r0 + p_.tr), c0, std::min(p_.C, c0 + p_.tc)};
  }

  // The float-scale fast path for one group; false when the group needs the generic path.
  bool scaled_group(int64_t g, int64_t& clipped) {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      const auto [base, r0, r1, c0, c1] = bounds(g);
      uint32_t amax = 0;
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = r0; i < r1; ++i) {
        uint32_t a;
        float l, h;
        fast::abs_min_max(x_ + base + i * p_.C + c0, c1 - c0, a, l, h);
        amax = std::max(amax, a);
        lo = std::min(lo, l);
        hi = std::max(hi, h);
      }
      if (amax >= 0x7F800000u) return false;  // NaN / Inf: the generic path makes the tile NaN
      fast::GroupArith ga;
      if (!scale_group(g, amax, lo, hi, ga)) return false;
      for (int64_t i = r0; i < r1; ++i)
        scaled_run(ga, base + i * p_.C + c0, base + i * p_.C + c1, clipped);
      return true;
    }
  }

  // Group g's scale from its finite statistics, stored with its zero point; ga receives the
  // group's arithmetic. False when the group needs the generic path.
  bool scale_group(int64_t g, uint32_t amax, float lo, float hi, fast::GroupArith& ga) {
    const GroupScale gs = detail::choose_scale(kp_, scalar::bits_float(amax), lo, hi, false);
    if (!fast::group_arith(kp_, gs, ga)) return false;
    if (out_.scale) detail::store_code(out_.scale, p_.scale_dtype, g, gs.scale_code, kp_.scale);
    if (out_.zero) detail::store_code(out_.zero, p_.second_dtype, g, gs.zero_code, kp_.second);
    return true;
  }

  // Whether scaled_batch applies: short 1-D tiles on the float-scale fast path.
  bool batched() const { return scaled_ && p_.tr == 1 && p_.tc <= 256; }

  // Short 1-D float-scaled groups g, g + 1, ... (before gend) of one row, in one batch: how many
  // it cast, 0 where group g needs the single-group path.
  int64_t scaled_batch(int64_t g, int64_t gend, int64_t& clipped) {
    if constexpr (!std::is_same_v<T, float>) {
      return 0;
    } else {
      constexpr int64_t kBatch = 64;
      const Bounds bd = bounds(g);
      const int64_t n = std::min({gend - g, kBatch, (p_.C - bd.c0) / p_.tc});  // full tiles only
      if (n <= 0) return 0;
      const int64_t first = bd.base + bd.r0 * p_.C + bd.c0;
      fast::GroupArith ga[kBatch];
      int64_t k = 0;
      if (sc_.ok) {
        uint32_t amax[kBatch], codes[kBatch];
        int64_t m = 0;
        for (; m < n; ++m) {
          float lo, hi;
          fast::abs_min_max_short(x_ + first + m * p_.tc, p_.tc, amax[m], lo, hi);
          if (amax[m] >= 0x7F800000u) break;
        }
        k = fast::choose_scales(sc_, kp_.tensor_scale, amax, static_cast<int>(m), ga, codes);
        if (out_.scale)
          for (int64_t j = 0; j < k; ++j)
            detail::store_code(out_.scale, p_.scale_dtype, g + j, codes[j], kp_.scale);
      } else {
        for (; k < n; ++k) {
          uint32_t amax;
          float lo, hi;
          fast::abs_min_max_short(x_ + first + k * p_.tc, p_.tc, amax, lo, hi);
          if (amax >= 0x7F800000u || !scale_group(g + k, amax, lo, hi, ga[k])) break;
        }
      }
      if (k == 0) return 0;
      clipped += fast::cast_scaled_groups(
          sp_, ga, static_cast<int>(k), static_cast<int>(p_.tc), x_ + first,
          out_.values ? out_.values + first : nullptr,
          out_.codes ? static_cast<uint8_t*>(out_.codes) + first * sp_.code_bytes : nullptr);
      return k;
    }
  }

  // Elements [b, e) of a group whose arithmetic is ga, in chunks of at most 2^20.
  void scaled_run(const fast::GroupArith& ga, int64_t b, int64_t e, int64_t& clipped) {
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = b; j < e; j += int64_t{1} << 20) {
        const int n = static_cast<int>(std::min<int64_t>(int64_t{1} << 20, e - j));
        clipped += fast::cast_scaled(
            sp_, ga, x_ + j, n, out_.values ? out_.values + j : nullptr,
            out_.codes ? static_cast<uint8_t*>(out_.codes) + j * sp_.code_bytes : nullptr);
      }
    }
  }

  // The fast path for one group; false when the group needs the generic path.
  bool fast_group(int64_t g, int64_t& clipped) {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      const auto [base, r0, r1, c0, c1] = bounds(g);
      uint32_t amax = 0;
      for (int64_t i = r0; i < r1; ++i)
        amax = std::max(amax, fast::abs_max_bits(x_ + base + i * p_.C + c0, c1 - c0));
      if (amax >= 0x7F800000u) return false;  // NaN / Inf: the generic path makes the tile NaN
      const GroupScale gs = detail::choose_scale(kp_, scalar::bits_float(amax), 0, 0, false);
      if (!fast::tile_ok(kp_.data, gs.shift)) return false;
      if (out_.scale) detail::store_code(out_.scale, p_.scale_dtype, g, gs.scale_code, kp_.scale);
      run_rows(base, r0, r1, c0, c1, gs.shift, clipped);
      return true;
    }
  }

  void run_rows(int64_t base, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int shift,
                int64_t& clipped) {
    if constexpr (std::is_same_v<T, float>) {
      constexpr int kChunk = 256;
      uint32_t rr[kChunk];
      int32_t qq[kChunk];
      uint8_t ng[kChunk];
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = c0; j < c1; j += kChunk) {
          const int n = static_cast<int>(std::min<int64_t>(kChunk, c1 - j));
          const int64_t e = base + i * p_.C + j;
          if (out_.codes && cp_.bytes) {
            clipped += fast::cast_tile_codes(tp_, cp_, x_ + e, n, shift, static_cast<uint64_t>(e),
                                             static_cast<uint8_t*>(out_.codes) + e * cp_.bytes);
            // Values too (cast_standard_with_values): the virtual cast's kernel on the same
            // tile and shift, its clipped count already taken.
            if (out_.values)
              fast::cast_tile(tp_, x_ + e, n, shift, static_cast<uint64_t>(e), out_.values + e,
                              nullptr, qq, ng);
            continue;
          }
          clipped += fast::cast_tile(tp_, x_ + e, n, shift, static_cast<uint64_t>(e),
                                     out_.values ? out_.values + e : nullptr,
                                     out_.codes ? rr : nullptr, qq, ng);
          if (out_.codes) {
            for (int k = 0; k < n; ++k) {
              scalar::Quantized q;
              q.r = rr[k];
              q.qe = qq[k];
              q.neg = ng[k];
              detail::store_code(out_.codes, p_.code_dtype, e + k, scalar::encode(q, kp_.data),
                                 kp_.data);
            }
          }
        }
      }
    }
  }

  // One tile-scaled group, start to finish.
  void group(int64_t g, std::vector<uint8_t>& keep, int64_t& clipped, int64_t& nonfinite,
             int64_t& pruned) {
    if (fast_ && fast_group(g, clipped)) return;
    if (scaled_ && scaled_group(g, clipped)) return;
    const auto [base, r0, r1, c0, c1] = bounds(g);
    const int64_t w = c1 - c0;
    pruned += sparsity_mask(p_, x_, base, r0, r1, c0, c1, keep);
    GroupStats st;
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = c0; j < c1; ++j)
        if (keep[(i - r0) * w + (j - c0)]) st.add(static_cast<double>(x_[base + i * p_.C + j]));
    GroupScale gs = detail::choose_scale(kp_, st.absmax, st.lo, st.hi, st.nonfinite);
    if (out_.scale) detail::store_code(out_.scale, p_.scale_dtype, g, gs.scale_code, kp_.scale);
    if (out_.zero) detail::store_code(out_.zero, p_.second_dtype, g, gs.zero_code, kp_.second);
    const int subs = p_.sub ? static_cast<int>(p_.tc / p_.sub) : 0;
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t j0 = c0; j0 < c1; j0 += (p_.sub ? p_.sub : w)) {
        const int64_t j1 = std::min(c1, j0 + (p_.sub ? p_.sub : w));
        int adj = 0;
        if (p_.sub) {
          adj = microexponent(gs, base + i * p_.C, j0, j1, keep, (i - r0) * w - c0);
          out_.meta ? void(out_.meta[g * subs + (j0 - c0) / p_.sub] = static_cast<uint8_t>(adj))
                    : void();
        }
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t e = base + i * p_.C + j;
          const double v = static_cast<double>(x_[e]);
          if (!finite(v)) ++nonfinite;
          const bool kept = keep[(i - r0) * w + (j - c0)] != 0;
          if (out_.mask) out_.mask[e] = kept;
          scalar::Quantized q;
          if (kept) {
            q = detail::encode_element(kp_, gs, v, adj, static_cast<uint64_t>(e));
            clipped += q.clipped;
          }
          if (out_.values) out_.values[e] = kept ? detail::decode_element(kp_, gs, q, adj) : 0.0f;
          if (out_.codes)
            detail::store_code(out_.codes, p_.code_dtype, e,
                               kept ? scalar::encode(q, kp_.data) : 0u, kp_.data);
        }
      }
    }
  }

  // A subtile's exponent offset below its tile's scale (spec README, decisions 10 and 14).
  int microexponent(const GroupScale& gs, int64_t row, int64_t j0, int64_t j1,
                    const std::vector<uint8_t>& keep, int64_t koff) const {
    double a = 0;
    for (int64_t j = j0; j < j1; ++j)
      if (keep[koff + j]) a = std::max(a, std::fabs(static_cast<double>(x_[row + j])));
    return detail::subtile_offset(kp_, gs, a);
  }

  // Elements [b, e) of a tensor-scoped cast (one scale for everything).
  void elements(const GroupScale& gs, int64_t b, int64_t e, int64_t& clipped, int64_t& nonfinite) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_) {
        bool bad;
        const int64_t c = fast::cast_bf16(
            x_ + b, static_cast<int>(e - b), out_.values ? out_.values + b : nullptr,
            out_.codes ? static_cast<uint16_t*>(out_.codes) + b : nullptr, bad);
        if (!bad) {
          clipped += c;
          return;
        }
      } else if (fast_ && !gs.nan && fast::tile_ok(kp_.data, gs.shift)) {
        if (fast::abs_max_bits(x_ + b, e - b) < 0x7F800000u) {
          run_rows(0, 0, 1, b, e, gs.shift, clipped);
          return;
        }
      }
      fast::GroupArith ga;
      if (scaled_ && fast::group_arith(kp_, gs, ga) &&
          fast::abs_max_bits(x_ + b, e - b) < 0x7F800000u) {
        scaled_run(ga, b, e, clipped);
        return;
      }
    }
    for (int64_t i = b; i < e; ++i) {
      const double v = static_cast<double>(x_[i]);
      if (!finite(v)) ++nonfinite;
      scalar::Quantized q = detail::encode_element(kp_, gs, v, 0, static_cast<uint64_t>(i));
      clipped += q.clipped;
      if (out_.values) out_.values[i] = detail::decode_element(kp_, gs, q, 0);
      if (out_.codes)
        detail::store_code(out_.codes, p_.code_dtype, i, scalar::encode(q, kp_.data), kp_.data);
    }
  }

  GroupStats stats(int64_t b, int64_t e) const {
    GroupStats st;
    if constexpr (std::is_same_v<T, float>) {
      // The same statistics on float32: where a value is NaN / Inf only `nonfinite` counts.
      uint32_t amax;
      float lo, hi;
      fast::abs_min_max(x_ + b, e - b, amax, lo, hi);
      st.nonfinite = amax >= 0x7F800000u;
      st.absmax = scalar::bits_float(amax);
      st.lo = lo;
      st.hi = hi;
      return st;
    }
    for (int64_t i = b; i < e; ++i) st.add(static_cast<double>(x_[i]));
    return st;
  }

 private:
  const CastPlan& p_;
  const KernelParams& kp_;
  const T* x_;
  Outputs& out_;
  bool fast_ = false;
  fast::TileParams tp_{};
  bool scaled_ = false;
  fast::ScaledParams sp_{};
  fast::CodeParams cp_{};
  fast::ScaleChoice sc_{};
  bool bf16_ = false;  // unscaled bfloat16: elements() casts and checks in one pass
};

template <class T>
GroupStats parallel_stats(Engine<T>& eng, int64_t n, const CastOptions& opt) {
  std::mutex mu;
  GroupStats total;
  detail::parallel_for(n, 1 << 16, opt.threads, nullptr, [&](int64_t b, int64_t e) {
    GroupStats st = eng.stats(b, e);
    std::lock_guard<std::mutex> lock(mu);
    total.merge(st);
  });
  return total;
}

template <class T>
void run(const CastPlan& p, KernelParams& kp, const T* x, Outputs& out, Counts& counts,
         Tensor* tenscale) {
  Engine<T> eng(p, kp, x, out);
  const int64_t n = p.numel();
  if (p.multiscale) {
    GroupStats st = parallel_stats(eng, n, p.opt);
    const detail::TensorScale ts =
        detail::choose_tensor_scale(kp, st, p.dtype.scale()->scale.max());
    kp.tensor_scale = ts.t;
    if (tenscale)
      detail::store_code(tenscale->mutable_data(), p.second_dtype, 0, ts.code, kp.second);
  }
  if (p.tensor_scope || !p.scaled) {
    GroupScale gs;
    if (p.scaled) {
      GroupStats st = parallel_stats(eng, n, p.opt);
      gs = detail::choose_scale(kp, st.absmax, st.lo, st.hi, st.nonfinite);
      if (out.scale) detail::store_code(out.scale, p.scale_dtype, 0, gs.scale_code, kp.scale);
      if (out.zero) detail::store_code(out.zero, p.second_dtype, 0, gs.zero_code, kp.second);
    }
    detail::parallel_for(n, 1 << 15, p.opt.threads, p.opt.job, [&](int64_t b, int64_t e) {
      int64_t clipped = 0, nonfinite = 0;
      eng.elements(gs, b, e, clipped, nonfinite);
      counts.clipped += clipped;
      counts.nonfinite += nonfinite;
    });
    return;
  }
  const int64_t groups = p.groups();
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / (p.tr * p.tc));
  const bool batched = eng.batched();
  detail::parallel_for(groups, grain, p.opt.threads, p.opt.job, [&](int64_t b, int64_t e) {
    std::vector<uint8_t> keep;
    int64_t clipped = 0, nonfinite = 0, pruned = 0;
    for (int64_t g = b; g < e;) {
      const int64_t k = batched ? eng.scaled_batch(g, e, clipped) : 0;
      if (k == 0) eng.group(g++, keep, clipped, nonfinite, pruned);
      g += k;
    }
    counts.clipped += clipped;
    counts.nonfinite += nonfinite;
    counts.pruned += pruned;
  });
}

// The input as a contiguous float32 or float64 array in the plan's permuted order.
struct Prepared {
  Tensor data;  // F32 or F64
};

Prepared prepare(const Tensor& x, const CastPlan& p) {
  Tensor src;
  switch (x.dtype()) {
    case DType::F32:
    case DType::F64:
      src = x;
      break;
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3:
    case DType::F8E5M2:
      src = x.to_f32();
      break;
    default:
      throw Error(std::string("cast input must be float32, float16, bfloat16 or float64 (got ") +
                  dtype_name(x.dtype()) + ")");
  }
  if (!p.permuted) return {src};
  Tensor out = Tensor::empty(src.dtype(), p.perm_shape);
  detail::permute(src.data(), out.mutable_data(), dtype_size(src.dtype()), p.in_shape, p.perm);
  return {out};
}

}  // namespace

namespace {

// An actual cast that also keeps its values (values_too) has the kernels write both in one run;
// without keep_codes it stores everything but the codes.
CastResult cast_standard_run(const Tensor& x, const DataType& dtype, const CastOptions& opt,
                             bool values_too, bool keep_codes = true) {
  CastPlan p = detail::make_plan(x.shape(), dtype, opt);
  KernelParams kp = kernel_params(p);
  Prepared in = prepare(x, p);
  const bool actual = opt.mode != CastMode::Virtual;
  CastResult r;
  r.dtype = dtype;
  r.options = opt;
  r.shape = x.shape();
  r.mode = opt.mode;
  Tensor values, codes, mask, scale, zero, meta;
  Outputs out;
  if (!actual || values_too) {
    values = Tensor::uninitialized(DType::F32, p.perm_shape);  // every element is written
    out.values = values.mutable_ptr<float>();
  }
  if (actual) {
    if (keep_codes) {
      codes = Tensor::empty(p.code_dtype, p.perm_shape);
      out.codes = codes.mutable_data();
    }
    if (p.scaled) {
      Shape ss = p.tensor_scope ? Shape{1} : detail::permuted_shape(p.scale_shape, p.perm);
      scale = Tensor::empty(p.scale_dtype, ss);
      out.scale = scale.mutable_data();
      if (p.zero_kind) {
        zero = Tensor::empty(p.second_dtype, ss);
        out.zero = zero.mutable_data();
      }
      if (p.multiscale) r.tenscale = Tensor::empty(p.second_dtype, {1});
      if (p.sub) {
        meta = Tensor::empty(DType::U8, detail::permuted_shape(p.meta_shape, p.perm));
        out.meta = meta.mutable_ptr<uint8_t>();
      }
    }
    if (p.sparse_dim >= 0) {
      mask = Tensor::empty(DType::Bool, p.perm_shape);
      out.mask = mask.mutable_ptr<uint8_t>();
    }
  }
  Counts counts;
  Tensor* ts = r.tenscale ? &r.tenscale : nullptr;
  if (in.data.dtype() == DType::F64)
    run(p, kp, in.data.ptr<double>(), out, counts, ts);
  else
    run(p, kp, in.data.ptr<float>(), out, counts, ts);
  r.counts.clipped = counts.clipped;
  r.counts.nonfinite = counts.nonfinite;
  r.counts.pruned = counts.pruned;
  if (values) r.values = detail::restored(values, p, x.shape());
  if (actual) {
    if (codes) r.codes = detail::restored(codes, p, x.shape());
    if (mask) r.mask = detail::restored(mask, p, x.shape());
    if (scale) r.scale = p.tensor_scope ? scale : detail::restored(scale, p, p.scale_shape);
    if (zero) r.zero = p.tensor_scope ? zero : detail::restored(zero, p, p.scale_shape);
    if (meta) r.meta = detail::restored(meta, p, p.meta_shape);
  }
  return r;
}

}  // namespace

CastResult cast_standard(const Tensor& x, const DataType& dtype, const CastOptions& opt) {
  return cast_standard_run(x, dtype, opt, false);
}

CastResult cast_standard_with_values(const Tensor& x, const DataType& dtype, const CastOptions& opt,
                                     bool codes) {
  if (opt.mode != CastMode::Actual)
    throw Error("cast_standard_with_values: the cast of " + dtype.str() + " must be actual");
  return cast_standard_run(x, dtype, opt, true, codes);
}

void validate_actual(const CastResult& r, const CastPlan& p) {
  auto need = [&](const Tensor& t, const char* what, DType dtype, const Shape& shape) {
    if (!t)
      throw Error(std::string("cast result of ") + r.dtype.str() + " has no " + what + " tensor");
    if (t.dtype() != dtype)
      throw Error(std::string("cast result of ") + r.dtype.str() + ": " + what + " tensor is " +
                  dtype_name(t.dtype()) + ", expected " + dtype_name(dtype));
    if (t.numel() != numel(shape))
      throw Error(std::string("cast result of ") + r.dtype.str() + ": " + what +
                  " tensor has shape " + shape_str(t.shape()) + ", expected " + shape_str(shape));
  };
  const Shape shape = r.shape.empty() ? Shape{1} : r.shape;
  need(r.codes, "codes", p.code_dtype, shape);
  if (p.scaled) {
    const Shape ss = p.tensor_scope ? Shape{1} : p.scale_shape;
    need(r.scale, "scale", p.scale_dtype, ss);
    if (p.zero_kind) need(r.zero, "zero", p.second_dtype, ss);
    if (p.multiscale) need(r.tenscale, "tenscale", p.second_dtype, {1});
    if (p.sub) {
      need(r.meta, "meta", DType::U8, p.meta_shape);
      const uint8_t* m = r.meta.ptr<uint8_t>();
      for (int64_t i = 0; i < r.meta.numel(); ++i)
        if (m[i] >> p.offset_bits)
          throw Error("meta tensor: subtile exponent offset " + std::to_string(m[i]) + " at " +
                      std::to_string(i) + " does not fit the datatype's " +
                      std::to_string(p.offset_bits) + "-bit offsets (" + r.dtype.str() + ")");
    }
  }
  if (p.sparse_dim >= 0) need(r.mask, "mask", DType::Bool, shape);
}

Tensor upcast_standard(const CastResult& r) {
  CastPlan p = detail::make_plan(r.shape, r.dtype, r.options);
  KernelParams kp = kernel_params(p);
  validate_actual(r, p);
  // Bring every stored tensor into the permuted order the groups are defined in.
  auto perm_of = [&](const Tensor& t) { return t && t.numel() == 1 ? t : detail::permuted(t, p); };
  Tensor codes = perm_of(r.codes), mask = perm_of(r.mask), scale = perm_of(r.scale),
         zero = perm_of(r.zero), meta = perm_of(r.meta);
  if (p.multiscale) {
    if (!r.tenscale) throw Error("upcast of " + r.dtype.str() + " needs its tensor scale");
    kp.tensor_scale = scalar::decode_value(
        detail::load_code(r.tenscale.data(), p.second_dtype, 0, kp.second), kp.second);
  }
  Tensor values = Tensor::empty(DType::F32, p.perm_shape);
  float* out = values.mutable_ptr<float>();
  auto scale_of = [&](int64_t g) {
    if (!p.scaled) return GroupScale{};
    uint32_t sc = detail::load_code(scale.data(), p.scale_dtype, g, kp.scale);
    uint32_t zc = zero ? detail::load_code(zero.data(), p.second_dtype, g, kp.second) : 0u;
    return detail::scale_from_codes(kp, sc, zc);
  };
  auto element = [&](const GroupScale& gs, int64_t e, int adj) {
    if (mask && !mask.ptr<uint8_t>()[e]) return 0.0f;
    scalar::Quantized q =
        scalar::decode(detail::load_code(codes.data(), p.code_dtype, e, kp.data), kp.data);
    return detail::decode_element(kp, gs, q, adj);
  };
  const int64_t n = p.numel();
  if (p.tensor_scope || !p.scaled) {
    GroupScale gs = scale_of(0);
    detail::parallel_for(n, 1 << 15, r.options.threads, nullptr, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = element(gs, i, 0);
    });
  } else {
    const int64_t per = p.gr * p.gc;
    const int subs = p.sub ? static_cast<int>(p.tc / p.sub) : 0;
    detail::parallel_for(p.groups(), std::max<int64_t>(1, (1 << 15) / (p.tr * p.tc)),
                         r.options.threads, nullptr, [&](int64_t gb, int64_t ge) {
                           for (int64_t g = gb; g < ge; ++g) {
                             const GroupScale gs = scale_of(g);
                             const int64_t b = g / per, gi = (g % per) / p.gc, gj = g % p.gc;
                             const int64_t r0 = gi * p.tr, r1 = std::min(p.R, r0 + p.tr);
                             const int64_t c0 = gj * p.tc, c1 = std::min(p.C, c0 + p.tc);
                             for (int64_t i = r0; i < r1; ++i)
                               for (int64_t j = c0; j < c1; ++j) {
                                 const int adj =
                                     p.sub ? meta.ptr<uint8_t>()[g * subs + (j - c0) / p.sub] : 0;
                                 const int64_t e = b * p.R * p.C + i * p.C + j;
                                 out[e] = element(gs, e, adj);
                               }
                           }
                         });
  }
  return detail::restored(values, p, r.shape);
}

}  // namespace castscope::cpu
