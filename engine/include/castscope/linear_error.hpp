// The error a linear layer's output gets when its activations and weights are cast: y = x W^T
// against the same product of the cast operands (docs/gui.md, "Activations"). With a GPU the
// product of the cast operands runs where a deployment would run it: the FP8 tensor cores for the
// formats they take (cuBLASLt, fed CastScope's own codes and scales), else a bf16 / fp32
// cuBLASLt GEMM of the cast values.
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
  // The weight's reduction axis, as its resolved layout gives it (layout.hpp): automatic or the
  // last axis reads W as [out, in]; a leading one ("0", ":1": a MatMul B [K, N], GPT-2's Conv1D
  // [in, out], a Keras conv) as its transpose; a flattened trailing one ("1:", a conv
  // [O, I, k...]) as [O, I*k...].
  AxisSpec weight_axis{true};
  int64_t max_tokens = 0;  // use the first max_tokens rows of x (0: all)
  int hist_bins = 64;
  int gemm_iters = 5;         // timed launches of the GPU product of the cast operands (median)
  bool keep_outputs = false;  // fill LinearError::y and yq
};

struct LinearError {
  int64_t tokens = 0, in = 0, out = 0;
  double snr_db = 0;   // 10 log10(sum y^2 / sum (yq - y)^2), +inf when exact
  double rel_err = 0;  // ||yq - y|| / ||y||
  double max_abs_err = 0;
  double act_snr_db = 0, weight_snr_db = 0;  // of the operands themselves
  std::vector<float> channel_rel_err;        // per output channel: ||yq - y||_col / ||y||_col
  Histogram error_hist;                      // of (yq - y) over all outputs
  double cast_ms = 0, matmul_ms = 0;         // matmul_ms: both products, with transfers
  std::string backend;                       // where the casts ran
  // Which product of the cast operands ran, e.g. "cuBLASLt FP8 block 1x128/128x128",
  // "cuBLASLt FP8 e4m3 x e4m3 per-tensor", "cuBLASLt TCFP-12", "bf16 (GPU)", "fp32 (GPU)",
  // "fp32 (CPU)"; product_note says why a tensor-core path did not run where one might have.
  std::string product, product_note;
  bool tensor_cores = false;  // the product ran on the FP8 tensor cores
  double gemm_ms = 0;         // that product alone: median GPU time, or the CPU multiply's time
  Tensor y, yq;               // [tokens, out] float32, with keep_outputs
};

// x: float activations [..., in] (flattened to [tokens, in]); w: a weight whose reduction along
// o.weight_axis has `in` values, read as [out, in] (see weight_axis). The reference y is
// the float32 product of the uncast operands. Device CPU (or Auto without a GPU): both products
// are float32 multiplies summed in a fixed order, so the difference is the casts' alone. Device
// CUDA (or Auto with a GPU): the casts run on the GPU, y is a cuBLASLt fp32 GEMM and the cast
// operands are multiplied by cuBLASLt: FP8 tensor cores (fp32 accumulation, promoted every K
// block) for e4m3 / e5m2 with one float32 scale per tensor (fp8e4_tensor, fp8e5_tensor; not both
// e5m2), e4m3 activations in 1x128 tiles with e4m3 weights in 128x128 tiles (float32 scales,
// in % 128 == 0, sm_90), and TCFP-12 / TCFP-16 on both operands; any other pair as a bf16 GEMM
// when every cast value is a bfloat16, else fp32. Auto falls back to the CPU if the GPU fails.
// Throws Error naming the shapes when in differs.
// Operands shared by linear_error calls that multiply the same activations by the same weight
// in many datatypes (the model map's columns): the float32 operands are prepared once, on the
// GPU the activations cross PCIe once while they stay the same, each weight once, and the
// float32 reference product is computed once per pair. Holds device memory until destroyed or
// until other operands come; one thread at a time. Results are those of calls without it.
class LinearReuse {
 public:
  LinearReuse();
  ~LinearReuse();
  LinearReuse(const LinearReuse&) = delete;
  LinearReuse& operator=(const LinearReuse&) = delete;
  // Host-to-device copies of operands made through it (activations and weights).
  uint64_t uploads() const;

  struct State;  // linear_products.hpp
  State& state() { return *s_; }

 private:
  std::unique_ptr<State> s_;
};

LinearError linear_error(const Tensor& x, const Tensor& w, const LinearErrorOptions& o,
                         JobControl* job = nullptr, LinearReuse* reuse = nullptr);

// Activations with outlier channels, as LLM hidden states have: N(0, 1) everywhere, and
// `outliers` fixed channels scaled by outlier_scale. Deterministic in seed.
Tensor synthetic_activations(int64_t tokens, int64_t features, int outliers, double outlier_scale,
                             uint64_t seed);

// An activation tensor from .npy or .safetensors (the tensor `name`, or the only / first float
// tensor when name is empty). Throws Error naming the file.
Tensor load_activations(const std::string& path, const std::string& name = "");

}  // namespace castscope
