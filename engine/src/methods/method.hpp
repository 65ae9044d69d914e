// What the methods share: the weight as a [rows, cols] view, the family's quantizer for it, and
// the cast with given scales. One file per method (rtn.cpp, gptq.cpp, mse.cpp, awq.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "castscope/method.hpp"
#include "families/scaled_quantizer.hpp"

namespace castscope::methods {

using detail::GroupScale;
using detail::ScaledQuantizer;

// A weight as the cast sees it: float32 [rows, cols] in row-major order, quantized along cols.
struct WeightView {
  std::vector<float> w;
  int64_t rows = 0, cols = 0;
  Shape shape;           // the input's shape
  CastOptions options;   // resolved (axis, flatten) for `shape`
  CastOptions view_opt;  // for the [rows, cols] view: axis 1
};

// Throws Error naming the weight for shapes and options a method cannot take (rank below 2,
// leading-axes reductions, rotation, non-finite values).
WeightView weight_view(const Tensor& w, const CastOptions& options, const std::string& name,
                       const char* method);
// The family's quantizer for the view; Error naming the datatype and its family where there is
// none.
std::unique_ptr<ScaledQuantizer> quantizer_for(const DataType& d, const WeightView& v,
                                               const char* method);

// Each group's scale from the values of `w` (the round-to-nearest choice).
std::vector<GroupScale> choose_scales(const ScaledQuantizer& q, const float* w);
// Every value of `w` rounded with its group's scale: codes, and the values into `out` (may be
// null).
std::vector<uint32_t> round_with(const ScaledQuantizer& q, const float* w,
                                 const std::vector<GroupScale>& scales, float* out);
// One group's values gathered (row-major within the group).
void gather_group(const ScaledQuantizer& q, const float* w, int64_t g, std::vector<float>& out);

// Calibration inputs as float64 [tokens, cols]; Error naming the weight and both widths when
// they disagree, and non-finite inputs.
std::vector<double> calibration_inputs(const Calibration& c, const WeightView& v,
                                       const std::string& name, const char* method,
                                       int64_t* tokens);
// ||X W^T - X Q^T||_F for X [tokens, cols].
double output_error(const std::vector<double>& x, int64_t tokens, const float* w, const float* q,
                    int64_t rows, int64_t cols);

MethodResult gptq(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m,
                  const std::vector<double>& x, int64_t tokens, const std::string& name);
MethodResult mse(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m);
MethodResult awq(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m,
                 const std::vector<double>& x, int64_t tokens, const std::string& name);

}  // namespace castscope::methods
