// The error a linear layer's output gets when its activations and weights are cast: y = x W^T
// against the same product of the cast operands (docs/gui.md, "Activations").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"

namespace castscope {

struct LinearErrorOptions {
  std::optional<DataType> act_dtype;     // empty: activations kept in float32
  std::optional<DataType> weight_dtype;  // empty: weights kept in float32
  // Round, scale mode, device and rotation of both casts. Tiles run along the reduction axis
  // (the last axis of x [tokens, in] and of W [out, in]); axis is ignored. A rotation acts on
  // both operands with the same R, so x W^T = (x R^T)(W R^T)^T before casting.
  CastOptions cast;
  int64_t max_tokens = 0;  // use the first max_tokens rows of x (0: all)
  int hist_bins = 64;
};

struct LinearError {
  int64_t tokens = 0, in = 0, out = 0;
  double snr_db = 0;   // 10 log10(sum y^2 / sum (yq - y)^2), +inf when exact
  double rel_err = 0;  // ||yq - y|| / ||y||
  double max_abs_err = 0;
  double act_snr_db = 0, weight_snr_db = 0;  // of the operands themselves
  std::vector<float> channel_rel_err;        // per output channel: ||yq - y||_col / ||y||_col
  Histogram error_hist;                      // of (yq - y) over all outputs
  double cast_ms = 0, matmul_ms = 0;
  std::string backend;  // where the casts ran
};

// x: float activations [..., in] (flattened to [tokens, in]); w: [out, in]. Both products are
// float32 multiplies summed in a fixed order, so the difference is the casts' alone. Throws Error
// naming the shapes when in differs.
LinearError linear_error(const Tensor& x, const Tensor& w, const LinearErrorOptions& o,
                         JobControl* job = nullptr);

// Activations with outlier channels, as LLM hidden states have: N(0, 1) everywhere, and
// `outliers` fixed channels scaled by outlier_scale. Deterministic in seed.
Tensor synthetic_activations(int64_t tokens, int64_t features, int outliers, double outlier_scale,
                             uint64_t seed);

// An activation tensor from .npy or .safetensors (the tensor `name`, or the only / first float
// tensor when name is empty). Throws Error naming the file.
Tensor load_activations(const std::string& path, const std::string& name = "");

}  // namespace castscope
