// Tensors and results held where they were computed, their statistics where they are
// (castscope/placed.hpp), and casts of tensors that live on the device (castscope/executor.hpp).
#include <cmath>

#include "backends/device_api.hpp"
#include "castscope/executor.hpp"

namespace castscope::exec {

PlacedTensor::PlacedTensor(Tensor host) : host_(std::move(host)) {}

PlacedTensor::PlacedTensor(gpu::DeviceTensor device)
    : dev_(device ? std::make_shared<const gpu::DeviceTensor>(std::move(device)) : nullptr) {}

PlacedTensor PlacedTensor::borrow_device(DType dtype, Shape shape, std::shared_ptr<void> owner,
                                         void* data) {
  return PlacedTensor(gpu::DeviceTensor::borrow(dtype, std::move(shape), std::move(owner), data));
}

PlacedTensor PlacedTensor::upload(const Tensor& host_f32) {
  return PlacedTensor(gpu::DeviceTensor::upload(host_f32));
}

DType PlacedTensor::dtype() const {
  return dev_ ? dev_->dtype() : host_.dtype();
}

const Shape& PlacedTensor::shape() const {
  return dev_ ? dev_->shape() : host_.shape();
}

const Tensor& PlacedTensor::host() const {
  if (dev_) throw Error("the tensor is in device memory; download it first");
  return host_;
}

const gpu::DeviceTensor& PlacedTensor::dev() const {
  if (!dev_) throw Error("the tensor is in host memory, not on the device");
  return *dev_;
}

const void* PlacedTensor::device_data() const {
  return dev_ ? dev_->data() : nullptr;
}

Tensor PlacedTensor::to_host() const {
  return dev_ ? dev_->download() : host_;
}

PlacedTensor PlacedTensor::reshaped(Shape shape) const {
  return dev_ ? PlacedTensor(dev_->reshaped(std::move(shape)))
              : PlacedTensor(host_.reshaped(std::move(shape)));
}

Tensor PlacedTensor::block(int64_t r0, int64_t c0, int64_t h, int64_t w) const {
  if (dev_) return dev_->download_block(r0, c0, h, w);
  const Shape& s = host_.shape();
  const int64_t cols = s.empty() ? 1 : s.back(), rows = cols ? host_.numel() / cols : 0;
  if (r0 < 0 || c0 < 0 || h < 0 || w < 0 || r0 >= rows || c0 >= cols)
    throw Error("block outside the tensor's " + std::to_string(rows) + " x " +
                std::to_string(cols) + " fold");
  const int64_t bh = std::min(h, rows - r0), bw = std::min(w, cols - c0);
  const Tensor f = host_.dtype() == DType::F32 ? host_ : host_.to_f32();
  Tensor t = Tensor::empty(DType::F32, {bh, bw});
  for (int64_t r = 0; r < bh; ++r)
    for (int64_t c = 0; c < bw; ++c)
      t.mutable_ptr<float>()[r * bw + c] = f.ptr<float>()[(r0 + r) * cols + c0 + c];
  return t;
}

PlacedResult::PlacedResult(gpu::DeviceCastResult device)
    : dev_(std::make_shared<const gpu::DeviceCastResult>(std::move(device))) {}

PlacedTensor PlacedResult::part(Part p) const {
  if (const CastResult* r = h()) {
    const Tensor* t[] = {&r->values, &r->codes, &r->scale,    &r->zero,          &r->tenscale,
                         &r->meta,   &r->mask,  &r->residual, &r->residual_scale};
    return PlacedTensor(*t[static_cast<int>(p)]);
  }
  const gpu::DeviceTensor* t[] = {&dev_->values, &dev_->codes,    &dev_->scale,
                                  &dev_->zero,   &dev_->tenscale, &dev_->meta,
                                  &dev_->mask,   &dev_->residual, &dev_->residual_scale};
  return PlacedTensor(*t[static_cast<int>(p)]);
}

namespace {

// Both inputs on one side: true for the device.
bool on_device(const PlacedTensor& a, const PlacedTensor& b, const char* what) {
  if (a.on_device() != b.on_device())
    throw Error(std::string(what) + ": one input is in host memory and the other on the device");
  return a.on_device();
}

const float* f32(const PlacedTensor& t, const char* what) {
  const Tensor& h = t.host();
  if (h.dtype() != DType::F32) throw Error(std::string(what) + " takes float32 tensors");
  return h.ptr<float>();
}

}  // namespace

Stats compute_stats(const PlacedTensor& x, const PlacedTensor& q, int64_t clipped) {
  if (on_device(x, q, "statistics")) return gpu::compute_stats(x.dev(), q.dev(), clipped);
  return castscope::compute_stats(x.host(), q.host(), clipped);
}

Histogram histogram(const PlacedTensor& v, double lo, double hi, int bins, bool log_x) {
  if (v.on_device()) return gpu::histogram(v.dev(), lo, hi, bins, log_x);
  return castscope::histogram(f32(v, "a histogram"), v.numel(), lo, hi, bins, log_x);
}

Histogram error_histogram(const PlacedTensor& x, const PlacedTensor& q, double lo, double hi,
                          int bins) {
  if (on_device(x, q, "an error histogram"))
    return gpu::error_histogram(x.dev(), q.dev(), lo, hi, bins);
  if (x.numel() != q.numel()) throw Error("an error histogram takes tensors of one size");
  return castscope::error_histogram(f32(x, "an error histogram"), f32(q, "an error histogram"),
                                    x.numel(), lo, hi, bins);
}

ExponentHistogram exponent_histogram(const PlacedTensor& v) {
  if (v.on_device()) return gpu::exponent_histogram(v.dev());
  return castscope::exponent_histogram(f32(v, "an exponent histogram"), v.numel());
}

double absmax(const PlacedTensor& v) {
  if (v.on_device()) return gpu::absmax(v.dev());
  const float* p = f32(v, "absmax");
  double m = 0;
  for (int64_t i = 0; i < v.numel(); ++i)
    if (std::isfinite(p[i])) m = std::max(m, static_cast<double>(std::fabs(p[i])));
  return m;
}

TileMap tile_map(const PlacedTensor& x, const PlacedTensor& q, const PlacedResult& actual) {
  if (on_device(x, q, "a tile map")) return gpu::tile_map(x.dev(), q.dev(), actual.dev());
  return castscope::tile_map(x.host(), q.host(), actual.host());
}

std::vector<int64_t> cell_counts(const PlacedTensor& x, const PlacedTensor& q,
                                 const PlacedTensor* mask, int64_t cols, int64_t cell_rows,
                                 int64_t cell_cols, int64_t out_rows, int64_t out_cols) {
  if (!on_device(x, q, "mask cell counts") || (mask && !mask->on_device()))
    throw Error("mask cell counts are counted here for device tensors only");
  return gpu::cell_counts(x.dev(), q.dev(), mask ? &mask->dev() : nullptr, cols, cell_rows,
                          cell_cols, out_rows, out_cols);
}

const CastResult* PlacedResult::h() const {
  if (host_) return &*host_;
  if (!dev_) throw Error("empty cast result");
  return nullptr;
}

std::string PlacedResult::backend() const {
  const CastResult* r = h();
  return r ? r->backend : "cuda";
}

const DataType& PlacedResult::dtype() const {
  const CastResult* r = h();
  return r ? r->dtype : dev_->dtype;
}

CastMode PlacedResult::mode() const {
  const CastResult* r = h();
  return r ? r->mode : dev_->mode;
}

const Shape& PlacedResult::shape() const {
  const CastResult* r = h();
  return r ? r->shape : dev_->shape;
}

const CastCounts& PlacedResult::counts() const {
  const CastResult* r = h();
  return r ? r->counts : dev_->counts;
}

const CastResult& PlacedResult::host() const {
  const CastResult* r = h();
  if (!r) throw Error("the cast result is in device memory; download it first");
  return *r;
}

const gpu::DeviceCastResult& PlacedResult::dev() const {
  h();  // empty: Error
  if (!dev_) throw Error("the cast result is in host memory, not on the device");
  return *dev_;
}

CastResult PlacedResult::to_host() const {
  const CastResult* r = h();
  return r ? *r : dev_->download();
}

namespace {

// A device result in the layout that was asked for: the kernels pack 3- and 4-bit codes with an
// even last axis on the device; other compressed layouts are packed by the host packer and
// moved back.
gpu::DeviceCastResult settle(gpu::DeviceCastResult r, const CastOptions& o) {
  if (o.mode != CastMode::Compress || r.mode == CastMode::Compress) return r;
  gpu::DeviceTensor values = r.values;
  CastResult h = r.download();
  gpu::DeviceCastResult p = r;
  p.mode = CastMode::Compress;
  p.options.mode = CastMode::Compress;
  auto up = [](const Tensor& t) { return t ? gpu::DeviceTensor::upload(t) : gpu::DeviceTensor(); };
  p.codes = up(h.codes);
  p.scale = up(h.scale);
  p.zero = up(h.zero);
  p.tenscale = up(h.tenscale);
  p.meta = up(h.meta);
  p.mask = up(h.mask);
  p.residual = up(h.residual);
  p.residual_scale = up(h.residual_scale);
  p.values = values;
  return p;
}

}  // namespace

PlacedResult Executor::cast_resident(const PlacedTensor& x, const DataType& dtype,
                                     const CastOptions& o) {
  // The tensor's place decides: no host copy is made behind the caller's back.
  if (o.device == Device::CPU)
    throw Error("device='cpu' was asked for a CUDA tensor; move it to the host first");
  if (!x.on_device()) throw Error("cast_resident takes a tensor in device memory");
  // Actual / compressed device results carry their values so that upcast() stays on the GPU.
  gpu::DeviceCastResult d = settle(gpu::cast(x.dev(), dtype, o, o.mode != CastMode::Virtual), o);
  gpu::synchronize();
  note_device_ran();
  return PlacedResult(std::move(d));
}

}  // namespace castscope::exec
