#include "castscope/widgets/analysis.hpp"

#include <algorithm>
#include <cmath>

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

MaskImage mask_image(const uint8_t* set, const Shape& shape, int max_side, std::string what) {
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
  std::vector<int64_t> hits(static_cast<size_t>(m.out_rows * m.out_cols), 0);
  std::vector<int64_t> n(hits.size(), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t k = static_cast<size_t>((r / m.cell_rows) * m.out_cols + c / m.cell_cols);
      const bool on = set[r * cols + c] != 0;
      hits[k] += on;
      n[k] += 1;
      m.set += on;
    }
  m.total = rows * cols;
  m.fraction.resize(hits.size());
  for (size_t k = 0; k < hits.size(); ++k)
    m.fraction[k] = n[k] ? static_cast<float>(hits[k]) / static_cast<float>(n[k]) : 0.f;
  return m;
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

}  // namespace

std::shared_ptr<const Analysis> analyze(const Tensor& x_in, const DataType& dtype,
                                        CastOptions options, const std::string& name,
                                        const AnalysisOptions& ao, JobControl* job) {
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
  const int64_t n = x.numel();
  const bool tiled = (dtype.family() == Family::Standard || dtype.family() == Family::Codebook) &&
                     dtype.scaled() && !dtype.tensor_scaled();
  options.mode = tiled ? CastMode::Actual : CastMode::Virtual;
  options.job = job;
  CastResult r = cast(x, dtype, options);
  if (job) job->check();
  const Tensor q = tiled ? upcast(r) : r.values;
  a->backend = r.backend;
  a->options = options;
  a->options.job = nullptr;
  a->stats = compute_stats(x, q, r.counts.clipped);
  a->bits_per_value = dtype.bits_per_value(axis_length(options, x.shape()));
  a->axis = describe_axis(options, x.shape());
  const float* xp = x.ptr<float>();
  const float* qp = q.ptr<float>();
  double amax = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(xp[i])) amax = std::max(amax, std::fabs(static_cast<double>(xp[i])));
  a->absmax = amax;
  const double lim = amax > 0 ? amax * 1.02 : 1.0;
  const int bins = std::max(8, ao.bins);
  a->value_orig = histogram(xp, n, -lim, lim, bins);
  a->value_cast = histogram(qp, n, -lim, lim, bins);
  if (job) job->check();

  const ExponentHistogram eo = exponent_histogram(xp, n), ec = exponent_histogram(qp, n);
  int lo = 0, hi = 0;
  if (any_count(eo) || any_count(ec)) {
    lo = any_count(eo) ? eo.emin : ec.emin;
    hi = any_count(eo) ? eo.emax : ec.emax;
    if (any_count(ec)) lo = std::min(lo, ec.emin), hi = std::max(hi, ec.emax);
  }
  a->exp_lo = lo;
  a->exp_hi = hi;
  a->exp_orig = align(eo, lo, hi);
  a->exp_cast = align(ec, lo, hi);
  a->exp_zero_orig = eo.zeros;
  a->exp_zero_cast = ec.zeros;
  a->log_orig = histogram(xp, n, lo, hi + 1.0, bins, true);
  a->log_cast = histogram(qp, n, lo, hi + 1.0, bins, true);

  NumberSpec target = dtype.number();
  if (dtype.family() != Family::Standard && dtype.family() != Family::Codebook &&
      dtype.family() != Family::GGML)
    target = NumberSpec::parse("e4m3fn");  // TCFP's element format
  auto [rlo, rhi] = representable_log2(target);
  if (dtype.scaled() || dtype.family() != Family::Standard) {
    const double span = rhi - rlo;
    rhi = amax > 0 ? std::log2(amax) : rhi;
    rlo = rhi - span;
    a->rep_note = "range of one scale block, placed at the tensor absmax";
  } else {
    a->rep_note = "range of " + target.name();
  }
  a->rep_lo = rlo;
  a->rep_hi = rhi;

  double emax = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(xp[i]) && std::isfinite(qp[i]))
      emax = std::max(emax, std::fabs(static_cast<double>(qp[i]) - xp[i]));
  const double elim = emax > 0 ? emax * 1.02 : 1.0;
  a->error = error_histogram(xp, qp, n, -elim, elim, bins);
  if (job) job->check();

  if (tiled) {
    try {
      a->tiles = tile_map(x, q, r);
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      a->tiles_note = e.what();
    }
  } else if (dtype.family() == Family::GGML) {
    a->tiles_note = "ggml block scales live inside the GGUF blocks; no tile map";
  } else if (dtype.family() != Family::Standard) {
    a->tiles_note = "TCFP block scales are internal to the TCFP kernels; no tile map";
  } else if (!dtype.scaled()) {
    a->tiles_note = "unscaled datatype: no tile scales";
  } else {
    a->tiles_note = "one scale for the whole tensor: no tile map";
  }

  std::vector<uint8_t> bits(static_cast<size_t>(n));
  if (tiled && r.mask && r.mask.numel() == n && r.mask.dtype() == DType::Bool) {
    const uint8_t* m = r.mask.ptr<uint8_t>();
    for (int64_t i = 0; i < n; ++i) bits[i] = m[i] != 0;
    const TileSpec* sp = dtype.sparse_tile();
    a->mask = mask_image(bits.data(), x.shape(), ao.mask_max_side,
                         "kept by " + std::to_string(sp ? sp->n : 0) + ":" +
                             std::to_string(sp ? sp->m : 0) + " sparsity");
  } else {
    for (int64_t i = 0; i < n; ++i) bits[i] = std::isfinite(xp[i]) && xp[i] != 0 && qp[i] == 0;
    a->mask = mask_image(bits.data(), x.shape(), ao.mask_max_side, "non-zero values cast to zero");
  }
  a->input = x;
  a->values = q;
  if (job) job->report(1.0);
  return a;
}

}  // namespace castscope::widgets
