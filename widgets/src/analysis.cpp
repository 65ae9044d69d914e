#include "castscope/widgets/analysis.hpp"

#include "castscope/widgets/tile_clipped.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/cast_cpu.hpp"
#include "castscope/device.hpp"
#include "castscope/storage_bits.hpp"
#include "host_views.hpp"

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

View2D view_2d(const Shape& shape, const CastOptions& opt) {
  View2D v;
  if (shape.empty()) return v;
  if (shape.size() == 1) {
    v.cols = shape[0];
    return v;
  }
  const CastOptions o = resolve_axis(opt, shape);
  const Shape s = cast_view_shape(shape, o);
  const int rank = static_cast<int>(s.size());
  // The reduction axis of the cast's view: the first with lead ([reduction, outputs]), the
  // merged last one with flatten, else the axis itself.
  const int ax = o.lead ? 0 : o.flatten ? rank - 1 : ((o.axis % rank) + rank) % rank;
  v.cols = s[ax];
  for (int i = ax + 1; i < rank; ++i) v.inner *= s[i];
  v.rows = v.cols ? numel(shape) / v.cols : 0;
  return v;
}

double storage_bits_per_value(const DataType& d, const Shape& shape, const CastOptions& o,
                              double* nominal, int64_t* row_length) {
  const int64_t n = numel(shape);
  if (nominal) *nominal = d.bits_per_value();
  if (row_length) *row_length = n > 0 ? axis_length(o, shape) : 0;
  if (n <= 0) return 0;
  return static_cast<double>(storage_bits(d, shape, o)) / static_cast<double>(n);
}

std::string bits_label(double bits, double nominal, int64_t row_length) {
  char a[32], b[32];
  std::snprintf(a, sizeof a, "%.4g", bits);
  std::snprintf(b, sizeof b, "%.4g", nominal);
  if (std::strcmp(a, b) == 0 || row_length <= 0) return a;
  return std::string("nominal ") + b + ", on rows of " + std::to_string(row_length) + ": " + a;
}

std::string refused_along(const DataType& d, const View2D& view, const std::string& axis) {
  // ggml's blocks run along a row in memory: a reduction axis that is not the last one in
  // memory cannot hold them, and computing them along the rows instead would show another cast.
  if (!family_traits(d.family()).gguf_blocks || view.contiguous()) return "";
  return d.str() +
         " quantizes blocks along the last axis in memory (ggml's rows); this tensor's "
         "quantization axis " +
         axis + " is not, so it is not cast along another axis";
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
MaskImage mask_layout(const View2D& view, int max_side, std::string what) {
  MaskImage m;
  m.what = std::move(what);
  const int64_t rows = view.rows, cols = view.cols;
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

}  // namespace

MaskImage mask_image(const uint8_t* set, const View2D& view, int max_side, std::string what) {
  MaskImage m = mask_layout(view, max_side, std::move(what));
  if (m.total) finish_mask(m, mask_cells(m, view, [&](int64_t i) { return set[i] != 0; }));
  return m;
}

MaskImage mask_image(const uint8_t* set, const Shape& shape, int max_side, std::string what) {
  const auto [rows, cols] = fold_2d(shape);
  return mask_image(set, View2D{rows, cols, 1}, max_side, std::move(what));
}

void retain_freed_memory() {
#if defined(__GLIBC__)
  // Blocks below the mmap threshold come from the heap, which is trimmed only past the trim
  // threshold; tensors larger than 32 MB still go straight back to the system.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
  // The tensors of 2 MiB or more (a cast's values and codes) are mapped by the engine: up to
  // 256 MiB of them, freed by the last update, serve the next one (a 4096 x 4096 float32 update
  // frees about 100 MiB).
  set_storage_reuse(size_t{256} << 20);
}

exec::PlacedTensor DeviceInput::get(const Tensor& x) {
  return exec::cuda_placed(device_.get(x));
}

std::shared_ptr<const InputViews> DeviceInput::input_views(const Tensor& x) {
  std::lock_guard<std::mutex> lock(mu_);
  return same_storage(views_key_, x) ? views_ : nullptr;
}

void DeviceInput::keep_input_views(const Tensor& x, std::shared_ptr<const InputViews> v) {
  std::lock_guard<std::mutex> lock(mu_);
  views_key_ = x;
  views_ = std::move(v);
}

Tensor values_block(const Analysis& a, int64_t r0, int64_t c0, int64_t h, int64_t w) {
  const View2D& v = a.view;
  if (!a.values) throw Error("the analysis holds no cast values");
  if (r0 < 0 || c0 < 0 || h < 0 || w < 0 || r0 >= v.rows || c0 >= v.cols)
    throw Error("block at (" + std::to_string(r0) + ", " + std::to_string(c0) +
                ") is outside the " + std::to_string(v.rows) + " x " + std::to_string(v.cols) +
                " view [outputs, reduction] of the values");
  const int64_t bh = std::min(h, v.rows - r0), bw = std::min(w, v.cols - c0);
  // A block reads the 2-D fold of its tensor's shape: the values are reshaped to the view (a
  // conv weight's [O, I*kh*kw]) or, for a transposed view, to the storage's [outer * cols,
  // inner], so that only the block leaves device memory.
  if (v.contiguous()) return a.values.reshaped({v.rows, v.cols}).block(r0, c0, bh, bw);
  // A transposed view: the rows of one outer index are columns of the storage's
  // [outer * cols, inner] fold, read back as one block each and transposed here.
  const exec::PlacedTensor storage = a.values.reshaped({v.rows / v.inner * v.cols, v.inner});
  Tensor t = Tensor::empty(DType::F32, {bh, bw});
  float* dst = t.mutable_ptr<float>();
  for (int64_t r = r0; r < r0 + bh;) {
    const int64_t outer = r / v.inner, i0 = r % v.inner;
    const int64_t n = std::min(v.inner - i0, r0 + bh - r);
    const Tensor b = storage.block(outer * v.cols + c0, i0, bw, n);
    const float* src = b.ptr<float>();
    for (int64_t c = 0; c < bw; ++c)
      for (int64_t k = 0; k < n; ++k) dst[(r - r0 + k) * bw + c] = src[c * n + k];
    r += n;
  }
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
  return family_traits(d.family()).tensorcast_layout && d.scaled() && !d.tensor_scaled();
}

// The views' inputs where the cast left them, in host or device memory: the float32 input, its
// cast values and the cast result. The host computes the views in two fused passes
// (host_views.cpp), the device with a kernel a view; both give the same counts and scales.
struct Views {
  exec::PlacedTensor x, q;
  exec::PlacedResult r;
  bool tiled = false;
  View2D view;
  // The host's views of the input from an earlier analysis of the same tensor.
  const InputViews* known = nullptr;

  bool has_mask() const { return sparsity_mask(tiled, r.part(exec::Part::Mask), x.numel()); }
  FirstPass first(const MaskImage& m, JobControl* job) const {
    if (!x.on_device()) return host().first(m, job);
    FirstPass f;
    f.stats = exec::compute_stats(x, q, r.counts().clipped);
    f.absmax = exec::absmax(x);
    f.eo = exec::exponent_histogram(x);
    f.ec = exec::exponent_histogram(q);
    if (m.total) f.cells = cells(m);
    return f;
  }
  SecondPass second(const Ranges& g, JobControl* job) const {
    if (!x.on_device()) return host().second(g, job);
    SecondPass s;
    s.vo = exec::histogram(x, -g.lim, g.lim, g.bins, false);
    s.vc = exec::histogram(q, -g.lim, g.lim, g.bins, false);
    s.lo = exec::histogram(x, g.lo, g.hi, g.bins, true);
    s.lc = exec::histogram(q, g.lo, g.hi, g.bins, true);
    s.err = exec::error_histogram(x, q, -g.elim, g.elim, g.bins);
    return s;
  }
  TileMap tiles() const { return x.on_device() ? exec::tile_map(x, q, r) : host().tiles(); }

 private:
  // The host passes over the same data, made on first use (the second pass leaves the tile map
  // it fused in them for tiles()).
  const HostViews& host() const {
    if (!host_) {
      host_.emplace();
      host_->x = x.host();
      host_->q = q.host();
      host_->r = r.host();
      host_->tiled = tiled;
      host_->view = view;
      host_->known = known;
    }
    return *host_;
  }
  mutable std::optional<HostViews> host_;

  // The mask image's per-cell counts on the device.
  std::vector<int64_t> cells(const MaskImage& m) const {
    const exec::PlacedTensor mask = r.part(exec::Part::Mask);
    const exec::PlacedTensor* mk = has_mask() ? &mask : nullptr;
    if (view.contiguous())
      return exec::cell_counts(x, q, mk, m.cols, m.cell_rows, m.cell_cols, m.out_rows, m.out_cols);
    // A transposed view ([K, N] reduced over K): the cells of the storage's [K, N] grid, turned.
    if (view.rows != view.inner)
      throw Error(
          "the mask of a view that is neither the storage order nor its transpose is "
          "counted on the host");
    const std::vector<int64_t> t =
        exec::cell_counts(x, q, mk, view.inner, m.cell_cols, m.cell_rows, m.out_cols, m.out_rows);
    std::vector<int64_t> out(t.size());
    for (int64_t i = 0; i < m.out_rows; ++i)
      for (int64_t j = 0; j < m.out_cols; ++j)
        out[static_cast<size_t>(i * m.out_cols + j)] = t[static_cast<size_t>(j * m.out_rows + i)];
    return out;
  }
};

// Every view after the cast, from host or device data alike: the metrics first (and handed to
// on_metrics), then the histograms, the tile map and the mask.
void compute_views(Analysis& a, const Views& v, const AnalysisOptions& ao, JobControl* job,
                   ExponentHistogram* eo_out = nullptr) {
  const DataType& d = a.dtype;
  std::string what = "non-zero values cast to zero";
  if (v.has_mask()) {
    const TileSpec* sp = d.sparse_tile();
    what = "kept by " + std::to_string(sp ? sp->n : 0) + ":" + std::to_string(sp ? sp->m : 0) +
           " sparsity";
  }
  a.mask = mask_layout(a.view, ao.mask_max_side, what);
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
  } else if (const char* why = family_traits(d.family()).no_tile_map) {
    a.tiles_note = why;
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
  const FamilyTraits& fam = family_traits(d.family());
  const NumberSpec target = fam.element_format ? NumberSpec::parse(fam.element_format) : d.number();
  auto [rlo, rhi] = representable_log2(target);
  if (d.scaled() || fam.block_scaled) {
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

// The one value of a two-level datatype's tensor scale (stored as float32), NaN without one.
double tensor_scale_of(const exec::PlacedResult& r) {
  const exec::PlacedTensor p = r.part(exec::Part::Tenscale);
  if (!p || p.numel() != 1 || p.dtype() != DType::F32)
    return std::numeric_limits<double>::quiet_NaN();
  return p.to_host().ptr<float>()[0];
}

// The views with the cast on the device: only the views come back to the host.
void device_views(Analysis& a, const Tensor& x, const CastOptions& options,
                  const AnalysisOptions& ao, JobControl* job, DeviceInput* input) {
  Views v;
  v.tiled = tiled_dtype(a.dtype);
  v.view = a.view;
  v.x = input ? input->get(x) : exec::PlacedTensor::upload(x);
  v.r = exec::current().cast_resident(v.x, a.dtype, options);
  v.q = v.r.values();
  if (job) job->check();
  a.backend = "cuda";
  compute_views(a, v, ao, job);
  if (ao.keep_values) a.values = v.q;
  a.tensor_scale = tensor_scale_of(v.r);
  a.on_device = true;
  a.tile_clipped_note = "not counted when the views are computed on the GPU";
}

// The views with the cast on the host. A tiled cast of the standard family on the CPU takes
// values and scales from one run of the kernels (the values are upcast()'s bits, as a virtual
// cast gives them; no view reads the codes).
void host_views(Analysis& a, const Tensor& x_in, const Tensor& x, const CastOptions& options,
                const AnalysisOptions& ao, JobControl* job, DeviceInput* input) {
  const DataType& dtype = a.dtype;
  Views v;
  v.tiled = tiled_dtype(dtype);
  v.view = a.view;
  v.x = exec::PlacedTensor(x);
  const CastOptions ro = resolve_axis(options, x.shape());
  const bool one_run = v.tiled && family_traits(dtype.family()).grammar && !ro.flatten &&
                       !ro.rotate.enabled() &&
                       (options.device == Device::CPU || (!gpu_starting() && !gpu::available()));
  CastResult r;
  Tensor q;
  if (one_run) {
    r = cpu::cast_standard_with_values(x, dtype, ro, false);
    r.backend = "cpu";
    r.options.device = options.device;
    q = r.values;
    r.values = Tensor();
  } else {
    r = cast(x, dtype, options);
    if (job) job->check();
    // The values of a tiled cast: a virtual cast of the standard family takes the CPU's fast
    // paths and gives upcast()'s bits (cast.hpp), at a fraction of the generic decode's cost.
    if (v.tiled && family_traits(dtype.family()).grammar) {
      CastOptions vo = options;
      vo.mode = CastMode::Virtual;
      q = cast(x, dtype, vo).values;
    } else {
      q = v.tiled ? upcast(r) : r.values;
    }
  }
  if (job) job->check();
  a.backend = r.backend;
  v.r = exec::PlacedResult(std::move(r));
  v.q = exec::PlacedTensor(q);
  a.tensor_scale = tensor_scale_of(v.r);
  const std::shared_ptr<const InputViews> known = input ? input->input_views(x_in) : nullptr;
  v.known = known.get();
  auto mine = std::make_shared<InputViews>();
  compute_views(a, v, ao, job, &mine->eo);
  if (input) {
    mine->absmax = a.absmax;
    mine->value = a.value_orig;
    mine->log = a.log_orig;
    input->keep_input_views(x_in, std::move(mine));
  }
  if (a.tiles) a.tile_clipped = tile_clipped(x, a.view, *a.tiles, v.r.host(), &a.tile_clipped_note);
  if (ao.keep_values) a.values = v.q;
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
  a->bits_per_value =
      storage_bits_per_value(dtype, x.shape(), options, &a->nominal_bits, &a->row_length);
  a->axis = describe_axis(options, x.shape());
  a->view = view_2d(x.shape(), options);
  if (const std::string why = refused_along(dtype, a->view, a->axis); !why.empty())
    throw Error("tensor '" + name + "': " + why);
  if (ao.keep_values) a->input = x;

  // The executor places the views: on the host while the app's GPU context is still starting
  // (the next update finds it running) and for families whose views need the host (a codebook's
  // tile map, ggml's reference quantizer). Rotations wrap the host cast. Only the CUDA backend
  // computes views on a device. A device failure other than a bad request (which the host
  // rejects as well, with the same message) leaves the host to do them all again.
  exec::Executor& ex = exec::current();
  const Device asked = ao.device && !options.rotate.enabled() ? options.device : Device::CPU;
  exec::Placement where = ex.place(exec::Work::Views, asked, x.numel(), &dtype);
  if (ex.backend_ptr() != exec::cuda_backend()) where.device = Device::CPU;
  const Analysis before = *a;
  ex.run<int>(
      where, exec::OnFailure::FallBack,
      [&] {
        device_views(*a, x, options, ao, job, input);
        return 0;
      },
      [&] {
        *a = before;
        host_views(*a, x_in, x, options, ao, job, input);
        return 0;
      },
      &a->device_note);
  representable_range(*a);
  if (job) job->report(1.0);
  return a;
}

}  // namespace castscope::widgets
