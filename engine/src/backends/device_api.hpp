// The device backend's own tensors, casts and statistics (CUDA builds; backends/nocuda reports
// why not). Engine-internal: callers outside reach them through the executor's PlacedTensor /
// PlacedResult (castscope/placed.hpp). The host API in cast.hpp / metrics.hpp copies tensors to
// the GPU and back for every call; this API keeps a tensor on the device across a cast and its
// statistics, so an interactive view can recompute everything for a
// new datatype without moving the tensor over PCIe. Results are those of the host functions of
// the same name: casts bit for bit, histogram counts and tile-map scales exactly, sums (MSE, SNR,
// bias) up to floating-point summation order.
//
// Without CUDA (or without a GPU) every function throws castscope::Error naming why; available()
// says so without throwing. Header stays C++17 so that CUDA sources can include it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/device.hpp"
#include "castscope/metrics.hpp"

namespace castscope::gpu {

// An owning n-dimensional array in GPU memory (stream-ordered pool allocation). Copies share the
// allocation, like Tensor.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Uninitialised storage; zeroed when `zero` is set. Throws Error when out of GPU memory.
  static DeviceTensor empty(DType dtype, Shape shape, bool zero = false);
  static DeviceTensor upload(const Tensor& host);
  // Device memory owned elsewhere (e.g. a framework's tensor): `owner` keeps it alive while any
  // copy of the result exists. The memory must be on the current device.
  static DeviceTensor borrow(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data);
  Tensor download() const;
  // Rows [r0, r0 + h) x columns [c0, c0 + w) of the 2-D view (leading dims folded into rows),
  // clipped to it: what a view that shows a few elements needs, without the whole tensor.
  Tensor download_block(int64_t r0, int64_t c0, int64_t h, int64_t w) const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return castscope::numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  const void* data() const { return mem_.get(); }
  void* mutable_data() { return mem_.get(); }
  explicit operator bool() const { return mem_ != nullptr; }
  DeviceTensor reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<void> mem_;
};

// A cast whose outputs stay on the device. Same fields as CastResult. `mode` is the layout the
// tensors are in: Compress when the kernels packed on the device, else Actual (download() then
// packs on the host when Compress was asked for) or Virtual.
struct DeviceCastResult {
  DataType dtype;
  CastOptions options;
  Shape shape;
  CastMode mode = CastMode::Virtual;
  DeviceTensor values, codes, scale, zero, tenscale, meta, mask, residual, residual_scale;
  CastCounts counts;
  // The host result, exactly what castscope::cast returns for the same input and options.
  CastResult download() const;
};

// Casts a device tensor (F32 / F16 / BF16 / F64). with_values: in Actual / Compress mode also
// write the float32 values (what upcast would give), for statistics next to the codes.
DeviceCastResult cast(const DeviceTensor& x, const DataType& dtype, const CastOptions& opt,
                      bool with_values = false);

Stats compute_stats(const DeviceTensor& original, const DeviceTensor& values, int64_t clipped = 0);
Histogram histogram(const DeviceTensor& values_f32, double lo, double hi, int bins,
                    bool log_x = false);
Histogram error_histogram(const DeviceTensor& x_f32, const DeviceTensor& q_f32, double lo,
                          double hi, int bins);
ExponentHistogram exponent_histogram(const DeviceTensor& values_f32);
// The largest finite |v| (0 when there is none), exactly as a host loop finds it.
double absmax(const DeviceTensor& values_f32);
// Counts of set elements per cell of a 2-D image: the tensor folded to rows x cols (leading dims
// into rows), cells of cell_rows x cell_cols elements, out_cols cells per row of cells. An
// element is set where mask (Bool, same element count) is non-zero, or without a mask where x is
// finite and non-zero and q is zero (a value cast to zero).
std::vector<int64_t> cell_counts(const DeviceTensor& x_f32, const DeviceTensor& q_f32,
                                 const DeviceTensor* mask, int64_t cols, int64_t cell_rows,
                                 int64_t cell_cols, int64_t out_rows, int64_t out_cols);
// `actual` must be an Actual (or device-packed Compress) result of a tile- or channel-scaled
// standard datatype of x_f32.
TileMap tile_map(const DeviceTensor& x_f32, const DeviceTensor& values,
                 const DeviceCastResult& actual);

// The tile map left on the device (rows x cols tiles, row-major), for an interactive view that
// shows only part of a large map: window() copies that part, download() all of it.
struct DeviceTileMap {
  int64_t rows = 0, cols = 0;
  int64_t tile_rows = 1, tile_cols = 1;
  DeviceTensor scale_code, scale_value, absmax, snr_db;  // U32, F32, F32, F32
  TileMap download() const;
  // Tiles [r0, r0 + h) x [c0, c0 + w), clipped to the map; the result's rows / cols are the
  // window's. Throws Error for a window outside the map.
  TileMap window(int64_t r0, int64_t c0, int64_t h, int64_t w) const;
};
DeviceTileMap tile_map_device(const DeviceTensor& x_f32, const DeviceTensor& values,
                              const DeviceCastResult& actual);

}  // namespace castscope::gpu
