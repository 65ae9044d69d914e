// The methods layer's entry (quantize) and what every method shares: the weight's [rows, cols]
// view, its family's quantizer, calibration inputs checked against the weight.
#include <cmath>

#include "castscope/error.hpp"
#include "families/family_table.hpp"
#include "methods/method.hpp"

namespace castscope {

const char* to_string(Method m) {
  switch (m) {
    case Method::RTN:
      return "rtn";
    case Method::GPTQ:
      return "gptq";
    case Method::MSE:
      return "mse";
    case Method::AWQ:
      return "awq";
  }
  return "?";
}

Method parse_method(std::string_view s) {
  for (Method m : {Method::RTN, Method::GPTQ, Method::MSE, Method::AWQ})
    if (s == to_string(m)) return m;
  throw Error("unknown quantization method '" + std::string(s) + "' (rtn | gptq | mse | awq)");
}

bool method_needs_calibration(Method m) {
  return m == Method::GPTQ || m == Method::AWQ;
}

MethodOptions parse_method_spec(std::string_view s, const MethodOptions& base) {
  MethodOptions m = base;
  if (s == "four-over-six") {
    m.method = Method::MSE;
    m.four_over_six = true;
    return m;
  }
  try {
    m.method = parse_method(s);
  } catch (const Error&) {
    throw Error("unknown quantization method '" + std::string(s) +
                "' (rtn | gptq | mse | awq | four-over-six)");
  }
  return m;
}

std::string method_spec(const MethodOptions& m) {
  return m.method == Method::MSE && m.four_over_six ? "four-over-six" : to_string(m.method);
}

}  // namespace castscope

namespace castscope::methods {

WeightView weight_view(const Tensor& w, const CastOptions& options, const std::string& name,
                       const char* method) {
  const std::string who = std::string(method) + " of '" + name + "'";
  if (w.numel() == 0) throw Error(who + ": the weight is empty");
  if (options.rotate.enabled())
    throw Error(who + ": a rotation before the method is not supported yet");
  WeightView v;
  v.shape = w.shape();
  v.options = resolve_axis(options, w.shape());
  if (v.options.lead)
    throw Error(who + ": a reduction over the leading axes (--axis :A) is not supported");
  const Shape view = cast_view_shape(w.shape(), v.options);
  int axis = v.options.flatten ? static_cast<int>(view.size()) - 1 : v.options.axis;
  if (axis < 0) axis += static_cast<int>(view.size());
  if (view.size() != 2 || axis != 1)
    throw Error(who +
                ": the method needs a 2-D weight [out, in] quantized along its last axis "
                "(or a conv weight flattened); shape " +
                shape_str(w.shape()) + " along axis " + std::to_string(v.options.axis));
  v.rows = view[0];
  v.cols = view[1];
  v.view_opt = view_options(v.options);
  v.view_opt.mode = CastMode::Actual;
  const Tensor f = w.dtype() == DType::F32 ? w : w.to_f32();
  const float* p = f.ptr<float>();
  v.w.assign(p, p + w.numel());
  for (size_t i = 0; i < v.w.size(); ++i)
    if (!std::isfinite(v.w[i]))
      throw Error(who + ": the weight holds a non-finite value at element " + std::to_string(i));
  return v;
}

std::unique_ptr<ScaledQuantizer> quantizer_for(const DataType& d, const WeightView& v,
                                               const char* method) {
  const auto& ops = detail::family_ops(d.family());
  if (!ops.scaled_quantizer)
    throw Error(std::string(method) + " does not support datatype " + d.str() + " (family " +
                ops.traits.name + ") yet");
  return ops.scaled_quantizer(d, v.view_opt, v.rows, v.cols);
}

std::vector<double> calibration_inputs(const Calibration& c, const WeightView& v,
                                       const std::string& name, const char* method,
                                       int64_t* tokens) {
  const std::string who = std::string(method) + " of '" + name + "'";
  if (!c.inputs)
    throw Error(who + " needs calibration inputs (--calib): activations [tokens, " +
                std::to_string(v.cols) + "]");
  const Shape& s = c.inputs.shape();
  if (s.size() < 2 || s.back() != v.cols)
    throw Error(who + ": calibration inputs of shape " + shape_str(s) +
                " disagree with the weight " + shape_str(v.shape) + ", whose input width is " +
                std::to_string(v.cols) + " (expected [tokens, " + std::to_string(v.cols) + "])");
  if (!dtype_is_float(c.inputs.dtype()))
    throw Error(who + ": calibration inputs hold " + dtype_name(c.inputs.dtype()) +
                "; they must be float");
  const Tensor f = c.inputs.dtype() == DType::F32 ? c.inputs : c.inputs.to_f32();
  *tokens = f.numel() / v.cols;
  std::vector<double> x(static_cast<size_t>(f.numel()));
  const float* p = f.ptr<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(p[i]))
      throw Error(who + ": calibration input " + std::to_string(i) + " is not finite");
    x[i] = p[i];
  }
  return x;
}

double output_error(const std::vector<double>& x, int64_t tokens, const float* w, const float* q,
                    int64_t rows, int64_t cols) {
  double sum = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double* xt = x.data() + t * cols;
    for (int64_t r = 0; r < rows; ++r) {
      double d = 0;
      const float *wr = w + r * cols, *qr = q + r * cols;
      for (int64_t c = 0; c < cols; ++c) d += xt[c] * (static_cast<double>(wr[c]) - qr[c]);
      sum += d * d;
    }
  }
  return std::sqrt(sum);
}

}  // namespace castscope::methods

namespace castscope {

MethodResult quantize(const Tensor& w, const DataType& dtype, const CastOptions& options,
                      const MethodOptions& m, const Calibration& calib, const std::string& name) {
  if (m.method == Method::RTN) {
    CastOptions o = options;
    if (o.mode == CastMode::Virtual) o.mode = CastMode::Actual;
    return {cast(w, dtype, o), Tensor(), 0};
  }
  const char* what = to_string(m.method);
  methods::WeightView v = methods::weight_view(w, options, name, what);
  auto q = methods::quantizer_for(dtype, v, what);
  q->choose_tensor_scale(v.w.data(), static_cast<int64_t>(v.w.size()));
  if (m.method == Method::MSE) return methods::mse(v, *q, m);
  int64_t tokens = 0;
  const std::vector<double> x = methods::calibration_inputs(calib, v, name, what, &tokens);
  if (m.method == Method::GPTQ) return methods::gptq(v, *q, m, x, tokens, name);
  return methods::awq(v, *q, m, x, tokens, name);
}

}  // namespace castscope

namespace castscope {

Tensor method_values(const MethodResult& r) {
  Tensor v = upcast(r.cast).clone();
  if (r.pre_quant_scale) {
    float* p = v.mutable_ptr<float>();
    const float* s = r.pre_quant_scale.ptr<float>();
    const int64_t n = r.pre_quant_scale.numel();
    for (int64_t i = 0; i < v.numel(); ++i) p[i] /= s[i % n];
  }
  return v;
}

double calibration_rel_error(const Tensor& inputs, const Tensor& w, const Tensor& q,
                             const CastOptions& options, const std::string& name) {
  const methods::WeightView wv = methods::weight_view(w, options, name, "output error");
  const methods::WeightView qv = methods::weight_view(q, options, name, "output error");
  int64_t tokens = 0;
  const std::vector<double> x =
      methods::calibration_inputs({inputs}, wv, name, "output error", &tokens);
  const std::vector<float> zero(wv.w.size(), 0.0f);
  const double ref = methods::output_error(x, tokens, wv.w.data(), zero.data(), wv.rows, wv.cols);
  const double err = methods::output_error(x, tokens, wv.w.data(), qv.w.data(), wv.rows, wv.cols);
  return ref > 0 ? err / ref : (err > 0 ? HUGE_VAL : 0.0);
}

}  // namespace castscope
