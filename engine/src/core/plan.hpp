// How a cast is laid out, shared by every backend: which axes the tiles cover, how the tensor is
// viewed as [B, R, C] with the tile axes last, the grid of scaling groups, the formats involved
// and the storage dtypes and shapes of every output tensor.
#pragma once

#include <vector>

#include "castscope/cast.hpp"
#include "castscope/scalar.hpp"
#include "core/group.hpp"

namespace castscope::detail {

struct CastPlan {
  DataType dtype;
  CastOptions opt;
  Shape in_shape;
  std::vector<int> perm;  // perm[i]: original axis at permuted position i (tile axes last)
  bool permuted = false;
  Shape perm_shape;
  int64_t B = 1, R = 1, C = 1;  // permuted tensor viewed as [B, R, C]
  int64_t tr = 1, tc = 1;       // tile extents along R and C
  int64_t gr = 1, gc = 1;       // groups along R and C per [R, C] slice
  bool scaled = false;
  bool tensor_scope = false;  // one scale for the whole tensor
  bool multiscale = false;    // tensor scale on top of tile scales
  int zero_kind = 0;          // 0 none, 1 float zero point, 2 integer zero point
  int sparse_dim = -1;        // -1 dense; 0: sparsity groups run along R; 1: along C
  int sp_n = 0, sp_m = 0;
  int sub = 0;                // subtile length along C (0: none)
  int offset_bits = 0;        // bits of each subtile's exponent offset (meta)
  scalar::Format data;        // the grid values are rounded onto
  scalar::Format data_codes;  // the format codes are written in (same as data except int grid)
  scalar::Format scale;       // tile (or tensor) scale format
  scalar::Format second;      // zero point or tensor scale format
  bool scale_is_exponent = false;
  double data_max = 0;  // largest finite magnitude of the data grid

  int64_t groups() const { return B * gr * gc; }
  int64_t numel() const { return B * R * C; }

  DType code_dtype = DType::U8, scale_dtype = DType::U8, second_dtype = DType::U8;
  Shape scale_shape, meta_shape;  // in the input's axis order
};

// Throws Error for bad input: empty tensor, axis out of range, etc. A tile longer than its axis
// is one partial tile.
CastPlan make_plan(const Shape& shape, const DataType& dtype, const CastOptions& opt);
// The plain-data parameters every backend's kernels take for a plan.
KernelParams kernel_params(const CastPlan& p);

// Storage dtype for codes of a format: the native dtype where there is one (F8E4M3, BF16, ...),
// otherwise the narrowest integer that holds the bits.
DType storage_dtype(const NumberSpec& n);
// Write / read a code (low f.bits bits) at index i of a storage buffer; ints are sign-extended.
void store_code(void* base, DType d, int64_t i, uint32_t code, const scalar::Format& f);
uint32_t load_code(const void* base, DType d, int64_t i, const scalar::Format& f);

// Copy of `src` (element size esize, shape `shape`) with axes reordered by perm (out axis i is
// src axis perm[i]), or its inverse.
void permute(const void* src, void* dst, size_t esize, const Shape& shape,
             const std::vector<int>& perm);
void unpermute(const void* src, void* dst, size_t esize, const Shape& in_shape,
               const std::vector<int>& perm);
// `original`'s extents in the order perm gives (out axis i is axis perm[i]).
Shape permuted_shape(const Shape& original, const std::vector<int>& perm);
// A tensor of the cast (input, codes, scales, ...) in the plan's permuted order, where its groups
// are defined; `t` itself when it is empty or the plan moves no axis.
Tensor permuted(const Tensor& t, const CastPlan& p);
// A tensor computed in the plan's permuted order, back in the axis order of `shape`.
Tensor restored(const Tensor& t, const CastPlan& p, const Shape& shape);

}  // namespace castscope::detail
