// Tensors and cast results where they live: host memory or a device's. Everything outside the
// backends (the views, the Python module, the model map) holds these instead of a host type and
// a device mirror of it, and asks for statistics of them without caring where they are: each
// function below runs where its inputs are (the device kernels give the host functions' counts
// and tile scales exactly, sums up to summation order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"

namespace castscope::gpu {
class DeviceTensor;
struct DeviceCastResult;
}  // namespace castscope::gpu

namespace castscope::exec {

class PlacedTensor {
 public:
  PlacedTensor() = default;
  explicit PlacedTensor(Tensor host);
  explicit PlacedTensor(gpu::DeviceTensor device);
  // Device memory owned elsewhere (a framework's tensor): `owner` keeps it alive while any copy
  // of the result exists. Error without a usable device.
  static PlacedTensor borrow_device(DType dtype, Shape shape, std::shared_ptr<void> owner,
                                    void* data);
  // A float32 copy of a host tensor in device memory. Error when it does not fit.
  static PlacedTensor upload(const Tensor& host_f32);

  explicit operator bool() const { return host_ || dev_; }
  bool on_device() const { return dev_ != nullptr; }
  Device device() const { return on_device() ? Device::CUDA : Device::CPU; }
  DType dtype() const;
  const Shape& shape() const;
  int64_t numel() const { return castscope::numel(shape()); }
  // The tensor itself; Error when it is held on the other side.
  const Tensor& host() const;
  const gpu::DeviceTensor& dev() const;
  // Device memory's address (null for a host tensor), for handing it to another library.
  const void* device_data() const;
  // The host tensor, downloaded when held on the device.
  Tensor to_host() const;
  PlacedTensor reshaped(Shape shape) const;
  // Rows [r0, r0 + h) x columns [c0, c0 + w) of the 2-D fold (leading dims into rows), clipped,
  // in host memory: only that block crosses PCIe.
  Tensor block(int64_t r0, int64_t c0, int64_t h, int64_t w) const;

 private:
  Tensor host_;
  std::shared_ptr<const gpu::DeviceTensor> dev_;
};

// The parts of a cast result (CastResult's tensors, by name).
enum class Part { Values, Codes, Scale, Zero, Tenscale, Meta, Mask, Residual, ResidualScale };

class PlacedResult {
 public:
  PlacedResult() = default;
  explicit PlacedResult(CastResult host) : host_(std::move(host)) {}
  explicit PlacedResult(gpu::DeviceCastResult device);
  explicit operator bool() const { return host_ || dev_; }
  bool on_device() const { return dev_ != nullptr; }
  Device device() const { return on_device() ? Device::CUDA : Device::CPU; }
  std::string backend() const;  // where the cast ran: the host result's backend, or "cuda"
  const DataType& dtype() const;
  CastMode mode() const;
  const Shape& shape() const;
  const CastCounts& counts() const;
  // One of the result's tensors where the result is (empty when the cast has none).
  PlacedTensor part(Part p) const;
  PlacedTensor values() const { return part(Part::Values); }
  // The result itself; Error when it is held on the other side.
  const CastResult& host() const;
  const gpu::DeviceCastResult& dev() const;
  // The host result, downloaded when held on the device (bit for bit what cast() gives).
  CastResult to_host() const;

 private:
  const CastResult* h() const;
  std::optional<CastResult> host_;
  std::shared_ptr<const gpu::DeviceCastResult> dev_;
};

// The statistics of metrics.hpp for placed tensors: each runs where its inputs are (all on one
// side; Error when they are split). cell_counts is the mask image's per-cell count of set
// elements (device only: the host views count them inside their own pass).
Stats compute_stats(const PlacedTensor& x, const PlacedTensor& q, int64_t clipped = 0);
Histogram histogram(const PlacedTensor& v, double lo, double hi, int bins, bool log_x = false);
Histogram error_histogram(const PlacedTensor& x, const PlacedTensor& q, double lo, double hi,
                          int bins);
ExponentHistogram exponent_histogram(const PlacedTensor& v);
double absmax(const PlacedTensor& v);
TileMap tile_map(const PlacedTensor& x, const PlacedTensor& q, const PlacedResult& actual);
std::vector<int64_t> cell_counts(const PlacedTensor& x, const PlacedTensor& q,
                                 const PlacedTensor* mask, int64_t cols, int64_t cell_rows,
                                 int64_t cell_cols, int64_t out_rows, int64_t out_cols);

}  // namespace castscope::exec
