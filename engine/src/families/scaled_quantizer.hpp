// A datatype's quantizer for the methods layer (GPTQ, MSE, AWQ): it chooses the scale of one
// scaling group from given values as the family's round-to-nearest cast does, and rounds values
// onto the grid of a given (already chosen) scale. Methods drive it and never look at the family;
// a family row that has none leaves FamilyOps::scaled_quantizer null.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "castscope/cast.hpp"
#include "core/group.hpp"

namespace castscope::detail {

// The quantizer works on a weight viewed as [rows, cols], quantized along cols (the view of
// cast_view_shape with the axis last). A scaling group covers rows [row0, row1) and columns
// [col0, col1); every element belongs to exactly one group.
struct GroupExtent {
  int64_t row0, row1, col0, col1;
};

class ScaledQuantizer {
 public:
  virtual ~ScaledQuantizer() = default;
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  virtual int64_t groups() const = 0;
  virtual int64_t group_of(int64_t row, int64_t col) const = 0;
  virtual GroupExtent extent(int64_t group) const = 0;
  // Group columns along the axis (a channel's: cols; the tensor's: cols).
  virtual int64_t group_cols() const = 0;
  // A multiscale datatype's tensor scale (NVFP4's global scale) from the whole weight, as the
  // round-to-nearest cast chooses it; every later group scale is chosen under it. Others: no-op.
  virtual void choose_tensor_scale(const float* w, int64_t n) = 0;
  // The scale of one group from values v (the group's elements, in any order), with the range
  // multiplied by `shrink` (1: the round-to-nearest choice; < 1: a searched, clipped range).
  // NaN / Inf in v gives the NaN scale, as the cast does.
  virtual GroupScale choose(const float* v, int64_t n, double shrink = 1.0) const = 0;
  // The same with the magnitude the scale maps onto the top of the grid divided by `top_ratio`
  // (four over six: NVFP4 blocks whose scale maps absmax onto 4 instead of 6 pass 6 / 4).
  virtual GroupScale choose_to(const float* v, int64_t n, double top_ratio) const = 0;
  // x rounded onto the grid of scale g: its value (float32, as decode gives it) and its code.
  // `index` is the element's index in the weight (stochastic rounding's stream).
  virtual float round(const GroupScale& g, double x, uint64_t index, uint32_t* code) const = 0;
  // The actual-mode result for the weight of input shape `shape` and options (axis resolved):
  // codes [rows * cols] in the view's row-major order, one scale per group.
  virtual CastResult result(const Shape& shape, const CastOptions& options,
                            const std::vector<uint32_t>& codes,
                            const std::vector<GroupScale>& scales) const = 0;
  // The scale of every group of an actual-mode result of this datatype (its scale, zero and
  // tensor-scale tensors); sets the tensor scale. Throws Error when the result's layout is not
  // this datatype's for this shape.
  virtual std::vector<GroupScale> scales_of(const CastResult& r) = 0;

 protected:
  int64_t rows_ = 0, cols_ = 0;
};

// The TensorCast-grammar family's quantizer for `dtype` on a weight whose cast view is [rows,
// cols] under `view_options` (axis last). Throws Error naming the datatype for what it cannot
// do: subtile exponent offsets, N:M sparsity, unscaled datatypes need no method.
std::unique_ptr<ScaledQuantizer> standard_scaled_quantizer(const DataType& dtype,
                                                           const CastOptions& view_options,
                                                           int64_t rows, int64_t cols);

}  // namespace castscope::detail
