// Quantization methods: how a weight's codes and scales are chosen for a datatype. `rtn` is the
// plain cast; `gptq` rounds column by column with the error fed forward through the inverse
// Hessian of calibration inputs; `mse` searches each group's scale; `awq` searches a scale per
// input channel on calibration inputs. Every method drives the datatype's family through its
// quantizer (choose a group's scale, cast with given scales) and never looks at the family.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "castscope/cast.hpp"

namespace castscope {

enum class Method { RTN, GPTQ, MSE, AWQ };

const char* to_string(Method m);
// rtn | gptq | mse | awq; throws Error naming the text.
Method parse_method(std::string_view s);
// GPTQ and AWQ need calibration inputs; rtn and mse do not.
bool method_needs_calibration(Method m);

struct MethodOptions {
  Method method = Method::RTN;
  // gptq (llm-compressor's GPTQModifier names): damping as a fraction of the Hessian's mean
  // diagonal, columns per lazy-update block, columns in order of descending Hessian diagonal,
  // and group scales chosen once from the original weight (static groups, llm-compressor's
  // behaviour) instead of from the updated weight as each group starts (GPTQ's and GPTQModel's
  // default).
  double damp = 0.01;
  int block = 128;
  bool act_order = false;
  bool static_groups = false;
  // mse (llm-compressor's MSE observer): shrink factors 1 - i / grid for i < maxshrink * grid,
  // error sum |q - x|^norm. four_over_six: NVFP4 blocks choose between the scales that map
  // their absmax onto 6 and onto 4 (ModelOpt), by squared error, instead of the grid search.
  double maxshrink = 0.20;
  int grid = 100;
  double norm = 2.4;
  bool four_over_six = false;
  // awq: ratios alpha = i / awq_grid for i < awq_grid.
  int awq_grid = 20;
};

// A method as plans and candidates spell it: rtn | gptq | mse | awq, or four-over-six (mse with
// four_over_six set); the other options stay as in `base`. Throws Error naming the text.
MethodOptions parse_method_spec(std::string_view s, const MethodOptions& base = {});
// The spelling parse_method_spec reads back (four-over-six for mse with four_over_six).
std::string method_spec(const MethodOptions& m);

// Calibration inputs of one weight: float activations [tokens, in] (`in` the weight's reduction
// length: a conv's inputs are its unfolded patches).
struct Calibration {
  Tensor inputs;
};

struct MethodResult {
  CastResult cast;          // actual mode: codes and scales as the cast of the datatype stores them
  Tensor pre_quant_scale;   // awq: float32 [in]; the weight cast is of W * s, inputs divide by s
  double output_error = 0;  // gptq / awq: ||X W^T - X Q^T||_F on the calibration inputs
};

// Quantizes weight `w` (a 2-D view under `options`: [out, in] along the last axis, or a conv
// weight flattened) to `dtype` with `m`. `name` names the weight in errors. Throws Error for a
// method that needs calibration without it, calibration whose width disagrees with the weight,
// non-finite weights or inputs, and datatypes or layouts the method does not support.
MethodResult quantize(const Tensor& w, const DataType& dtype, const CastOptions& options,
                      const MethodOptions& m, const Calibration& calib = {},
                      const std::string& name = "weight");

// The weight as the layer applies it after the method: the result's values, for awq divided by
// the pre-quant scale along the input axis (Q(W s) / s).
Tensor method_values(const MethodResult& r);
// ||X W^T - X Q^T|| / ||X W^T|| on calibration inputs [tokens, in] for a weight w and its
// quantized values q of one shape, viewed as the methods view them under `options`. Throws Error
// naming `name` when the inputs disagree with the weight.
double calibration_rel_error(const Tensor& inputs, const Tensor& w, const Tensor& q,
                             const CastOptions& options, const std::string& name = "weight");

// The cast of x onto given scales: every group of x rounded with the scales (scale, zero point,
// tensor scale) of `scales`, an actual-mode cast of the same datatype and shape. With the scales
// of cast(x) itself it gives cast(x)'s codes.
CastResult cast_with_scales(const Tensor& x, const CastResult& scales);
// The cast of x under a given tensor scale (NVFP4's global scale, as CastScope's multiplier t =
// 1 / compressed-tensors' global_scale): every group's scale chosen under t as cast(x) chooses it
// under its own. `like` is an actual-mode cast of x (its datatype, options and tensor-scale
// layout). Serves layers that share one tensor scale, as vLLM's fused projections need.
CastResult cast_with_tensor_scale(const Tensor& x, const CastResult& like, float tensor_scale);

}  // namespace castscope
