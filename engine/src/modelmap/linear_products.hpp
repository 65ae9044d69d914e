// The two products of linear_error() computed on the GPU (engine/src/cuda/linear_cuda.cu), so
// the host code can share the metrics with the CPU path. Not a public API.
#pragma once

#include <string>

#include "castscope/linear_error.hpp"
#include "castscope/placed.hpp"

namespace castscope::detail {

struct LinearProducts {
  Tensor y, yq;  // [tokens, out] float32 on the host
  double act_snr_db = 0, weight_snr_db = 0;
  double cast_ms = 0, matmul_ms = 0, gemm_ms = 0;
  std::string product, product_note;
  bool tensor_cores = false;
  std::string backend;  // where the casts ran
};

}  // namespace castscope::detail

namespace castscope {

// What a LinearReuse keeps: the callers' operands (by storage, as the key), their float32
// [tokens, in] / [out, in] forms, and on the GPU their device copies and the reference product.
struct LinearReuse::State {
  Tensor x_key, w_key;  // the tensors handed to linear_error
  AxisSpec w_axis{true};
  Tensor x, w;                    // float32 operands
  exec::PlacedTensor dx, dw, dy;  // device copies of x and w, and x w^T (column-major)
  Tensor y;                       // the reference product on the host, [tokens, out]
  double ref_ms = 0;
  uint64_t uploads = 0;
};

}  // namespace castscope

namespace castscope::detail {

// x [tokens, in] and w [out, in], float32. Throws Error without a usable GPU. With `reuse`, the
// device copies and the reference product it holds are used, and those it lacks are kept there.
LinearProducts linear_products_cuda(const Tensor& x, const Tensor& w, const LinearErrorOptions& o,
                                    JobControl* job, LinearReuse::State* reuse = nullptr);

}  // namespace castscope::detail
