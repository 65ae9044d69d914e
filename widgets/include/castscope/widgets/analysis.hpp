// What the views of one cast show, computed in one call on a worker thread. Nothing here touches
// ImGui or OpenGL: the widgets only draw a finished Analysis, and tests check it directly.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/executor.hpp"
#include "castscope/metrics.hpp"

namespace castscope::widgets {

// A tensor's 2-D view [outputs, reduction] under the quantization axis of its cast (layout_view
// in castscope/layout.hpp): the grid the tile map, the mask and the teaching view are drawn on.
// Where the reduction axis is not the last one in memory (a MatMul B [K, N] reduced over K), the
// view is a transpose: element (r, c) lies at at(r, c) of the tensor's row-major storage.
struct View2D {
  int64_t rows = 1, cols = 1;  // outputs, reduction length
  int64_t inner = 1;           // elements after the reduction axis in memory (1: memory order)
  int64_t at(int64_t r, int64_t c) const { return ((r / inner) * cols + c) * inner + r % inner; }
  bool contiguous() const { return inner == 1; }
};
// The view of `shape` under cast options `o` (an automatic axis resolved as the cast resolves
// it). Throws Error for an axis out of range.
View2D view_2d(const Shape& shape, const CastOptions& o);

// Storage bits per value of `d` on a tensor of `shape` under `o` (storage_bits over the element
// count), with the nominal figure and the row length it is counted on where asked for.
double storage_bits_per_value(const DataType& d, const Shape& shape, const CastOptions& o,
                              double* nominal = nullptr, int64_t* row_length = nullptr);
// "128" where the nominal figure says the same; otherwise "nominal 4.5, on rows of 9: 128".
std::string bits_label(double bits, double nominal, int64_t row_length);
// Why `d` cannot be cast along the quantization axis of `view` (blocks laid along a row in
// memory, such as ggml's, on a view whose reduction axis is not the last one in memory), or "".
std::string refused_along(const DataType& d, const View2D& view, const std::string& axis);

// A 2-D boolean image of a tensor's view [outputs, reduction] (View2D), reduced to
// at most max_side cells per side: each cell holds the fraction of its elements that are set.
struct MaskImage {
  int64_t rows = 0, cols = 0;            // source elements
  int64_t cell_rows = 1, cell_cols = 1;  // source elements per cell
  int64_t out_rows = 0, out_cols = 0;
  std::vector<float> fraction;  // out_rows * out_cols, in [0, 1]
  int64_t set = 0, total = 0;
  std::string what;  // "kept by 2:4 sparsity", "cast to zero", ...
};

struct Analysis;

struct AnalysisOptions {
  int bins = 96;
  int mask_max_side = 256;
  // Compute the views on the GPU when the cast runs there: the tensor and its cast values stay in
  // device memory and only the views come back. Off: everything on the host.
  bool device = true;
  // Keep the input and the cast values (the teaching view places single elements). Comparisons
  // of several casts leave them out: each would hold a tensor-sized copy, on the GPU or here.
  bool keep_values = true;
  // Called on the analysing thread as soon as the statistics are known, before the histograms,
  // tile map and mask: a view can show the metrics first. The analysis holds only the fields
  // filled so far.
  std::function<void(const Analysis&)> on_metrics;
};

// A tensor's float32 copy in device memory, made by the first analysis of it that runs on the
// GPU and reused by the next ones, so that recomputing the views for another datatype does not
// move the tensor over PCIe again. Safe to share between worker threads.
// The views of a tensor's own values (absmax, exponent and value histograms), which a change
// of datatype leaves as they are; analysis.cpp defines it.
struct InputViews;

class DeviceInput {
 public:
  // The device copy of x_f32 (uploaded when x_f32 is not the tensor held now).
  exec::PlacedTensor get(const Tensor& x_f32);
  // The host path's views of x's own values from the last analysis of the same tensor (null
  // for another tensor), and keeping them for the next one.
  std::shared_ptr<const InputViews> input_views(const Tensor& x);
  void keep_input_views(const Tensor& x, std::shared_ptr<const InputViews> v);

 private:
  std::mutex mu_;
  exec::DeviceCache device_{exec::cuda_backend()};  // the executor's cache of one tensor
  Tensor views_key_;
  std::shared_ptr<const InputViews> views_;
};

struct Analysis {
  std::string tensor;  // name shown in the views
  Shape shape;
  DataType dtype;
  CastOptions options;  // the job pointer is cleared
  std::string backend;
  Stats stats;
  // The storage this cast costs on this tensor (storage_bits over its element count): the one
  // size every panel shows. The datatype's nominal figure and the row length it differs on
  // (bits_label) are kept for the label only.
  double bits_per_value = 0;
  double nominal_bits = 0;
  int64_t row_length = 0;  // length of the quantization axis
  std::string axis;        // the quantization axis in use (describe_axis: "-1:4096", "1..3:147")
  View2D view;             // the 2-D view [outputs, reduction] the tiles and the mask lie on
  double absmax = 0;
  // Value histograms of the original and the cast over the same symmetric range, linear in x
  // and over log2|x|.
  Histogram value_orig, value_cast;
  Histogram log_orig, log_cast;
  // Exponent (binade) histograms, aligned: both cover [exp_lo, exp_hi].
  int exp_lo = 0, exp_hi = 0;
  std::vector<uint64_t> exp_orig, exp_cast;
  uint64_t exp_zero_orig = 0, exp_zero_cast = 0;
  // log2 of the smallest and largest magnitudes the target keeps (for a scaled datatype: with
  // the scale that the largest tile gets, i.e. relative to the tensor absmax).
  double rep_lo = 0, rep_hi = 0;
  std::string rep_note;
  Histogram error;
  std::optional<TileMap> tiles;
  // The second-level scale of a two-level datatype (NVFP4's float32 tensor scale) that every
  // tile scale multiplies; NaN for others.
  double tensor_scale = std::numeric_limits<double>::quiet_NaN();
  std::string tiles_note;  // why there is no tile map
  // Clipped elements per tile (tile_clipped.hpp); empty with the reason in the note when not
  // counted.
  std::vector<int64_t> tile_clipped;
  std::string tile_clipped_note;
  MaskImage mask;
  // Where the views were computed: on_device when on the GPU; device_note says why not when a
  // GPU was asked for and the host took over.
  bool on_device = false;
  std::string device_note;
  // The float32 input and the values it was cast to (input shape), for views that place
  // individual elements (the teaching view). The values stay where the views were computed
  // (device memory on the GPU path): values_block() copies out only the block asked for.
  Tensor input;
  exec::PlacedTensor values;
};

// Rows [r0, r0 + h) x columns [c0, c0 + w) of the cast values' 2-D view (Analysis::view: the
// same grid as the tile map), clipped.
Tensor values_block(const Analysis& a, int64_t r0, int64_t c0, int64_t h, int64_t w);

// Casts x (any float dtype, any rank) and computes every view. Throws Error for bad input and
// Cancelled when job->cancel is set. On the GPU path the device copy of x comes from `input`
// when given (else it is uploaded for this call only). Results agree with the host path: counts
// and tile maps exactly, sums (MSE, SNR) up to summation order.
std::shared_ptr<const Analysis> analyze(const Tensor& x, const DataType& dtype, CastOptions options,
                                        const std::string& name, const AnalysisOptions& ao = {},
                                        JobControl* job = nullptr, DeviceInput* input = nullptr);

// Asks the C library to keep freed blocks of up to 32 MB for reuse instead of returning them to
// the system. Every update builds a new analysis (a tile map of 16 MB for NVFP4 at 4096^2) and
// frees the last one; memory fresh from the system costs a page fault per 4 KiB page on first
// touch, which made up most of an update's time on the GPU path. Tensors of 2 MiB or more (the
// cast's values and codes) are likewise kept for the next update, up to 256 MiB
// (set_storage_reuse). The app calls it once at start. No effect outside glibc / Linux.
void retain_freed_memory();

// Representable magnitude range of a number format in log2 units: [smallest positive, max].
std::pair<double, double> representable_log2(const NumberSpec& n);

// The folded 2-D extent [rows, cols] of a shape (leading dims multiply into rows).
std::pair<int64_t, int64_t> fold_2d(const Shape& s);

// The mask image of `set` (one flag per element in the tensor's storage order) over `view`.
MaskImage mask_image(const uint8_t* set, const View2D& view, int max_side, std::string what);
MaskImage mask_image(const uint8_t* set, const Shape& shape, int max_side, std::string what);

}  // namespace castscope::widgets
