// The two products of linear_error() computed on the GPU (engine/src/cuda/linear_cuda.cu), so
// the host code can share the metrics with the CPU path. Not a public API.
#pragma once

#include <string>

#include "castscope/linear_error.hpp"

namespace castscope::detail {

struct LinearProducts {
  Tensor y, yq;  // [tokens, out] float32 on the host
  double act_snr_db = 0, weight_snr_db = 0;
  double cast_ms = 0, matmul_ms = 0, gemm_ms = 0;
  std::string product, product_note;
  bool tensor_cores = false;
};

// x [tokens, in] and w [out, in], float32. Throws Error without a usable GPU.
LinearProducts linear_products_cuda(const Tensor& x, const Tensor& w, const LinearErrorOptions& o,
                                    JobControl* job);

}  // namespace castscope::detail
