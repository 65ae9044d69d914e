// Results held where they were computed, and casts of tensors that live on the device
// (castscope/executor.hpp).
#include "castscope/executor.hpp"

namespace castscope::exec {

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

PlacedResult Executor::cast_resident(const gpu::DeviceTensor& x, const DataType& dtype,
                                     const CastOptions& o) {
  // The tensor's place decides: no host copy is made behind the caller's back.
  if (o.device == Device::CPU)
    throw Error("device='cpu' was asked for a CUDA tensor; move it to the host first");
  // Actual / compressed device results carry their values so that upcast() stays on the GPU.
  gpu::DeviceCastResult d = settle(gpu::cast(x, dtype, o, o.mode != CastMode::Virtual), o);
  gpu::synchronize();
  note_device_ran();
  return PlacedResult(std::move(d));
}

}  // namespace castscope::exec
