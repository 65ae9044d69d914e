// The TensorCast-grammar family's quantizer for methods: the round-to-nearest cast's own scale
// choice (choose_scale, choose_tensor_scale) and element rounding (encode_element /
// decode_element) from core/group.hpp, called one group or one element at a time, so that a
// method that keeps every scale and rounds every value as chosen here gives the cast's bits.
#include "backends/cpu/cast_cpu.hpp"
#include "castscope/error.hpp"
#include "core/plan.hpp"
#include "families/scaled_quantizer.hpp"

namespace castscope::detail {
namespace {

class StandardQuantizer final : public ScaledQuantizer {
 public:
  StandardQuantizer(const DataType& d, const CastOptions& o, int64_t rows, int64_t cols)
      : p_(make_plan({rows, cols}, d, o)), kp_(kernel_params(p_)) {
    rows_ = rows;
    cols_ = cols;
    if (!p_.scaled)
      throw Error("datatype " + d.str() +
                  " has no scales to choose: round-to-nearest (rtn) is its only method");
    if (p_.sub)
      throw Error("datatype " + d.str() +
                  ": subtile exponent offsets are not supported by quantization methods yet");
    if (p_.sparse_dim >= 0)
      throw Error("datatype " + d.str() +
                  ": N:M sparsity is not supported by quantization methods yet");
  }

  int64_t groups() const override { return p_.tensor_scope ? 1 : p_.groups(); }
  int64_t group_cols() const override { return p_.tensor_scope ? cols_ : p_.tc; }

  int64_t group_of(int64_t row, int64_t col) const override {
    if (p_.tensor_scope) return 0;
    const int64_t b = row / p_.R, i = row % p_.R;
    return (b * p_.gr + i / p_.tr) * p_.gc + col / p_.tc;
  }

  GroupExtent extent(int64_t g) const override {
    if (p_.tensor_scope) return {0, rows_, 0, cols_};
    const int64_t per = p_.gr * p_.gc, b = g / per, gi = (g % per) / p_.gc, gj = g % p_.gc;
    const int64_t r0 = gi * p_.tr, c0 = gj * p_.tc;
    return {b * p_.R + r0, b * p_.R + std::min(p_.R, r0 + p_.tr), c0, std::min(p_.C, c0 + p_.tc)};
  }

  void choose_tensor_scale(const float* w, int64_t n) override {
    if (!p_.multiscale) return;
    GroupStats st;
    for (int64_t i = 0; i < n; ++i) st.add(static_cast<double>(w[i]));
    ts_ = detail::choose_tensor_scale(kp_, st, p_.dtype.scale()->scale.max());
    kp_.tensor_scale = ts_.t;
  }

  GroupScale choose(const float* v, int64_t n, double shrink) const override {
    return choose_with(kp_, v, n, shrink);
  }

  GroupScale choose_to(const float* v, int64_t n, double top_ratio) const override {
    KernelParams kp = kp_;
    kp.data_max = kp_.data_max / top_ratio;
    return choose_with(kp, v, n, 1.0);
  }

  float round(const GroupScale& g, double x, uint64_t index, uint32_t* code) const override {
    const scalar::Quantized q = encode_element(kp_, g, x, 0, index);
    if (code) *code = scalar::encode(q, kp_.data);
    return decode_element(kp_, g, q, 0);
  }

  CastResult result(const Shape& shape, const CastOptions& o, const std::vector<uint32_t>& codes,
                    const std::vector<GroupScale>& scales) const override {
    CastResult r;
    r.dtype = p_.dtype;
    r.options = o;
    r.options.mode = CastMode::Actual;
    r.shape = shape;
    r.mode = CastMode::Actual;
    r.codes = Tensor::empty(p_.code_dtype, {rows_, cols_});
    void* c = r.codes.mutable_data();
    for (size_t i = 0; i < codes.size(); ++i)
      store_code(c, p_.code_dtype, static_cast<int64_t>(i), codes[i], kp_.data);
    const Shape ss = p_.tensor_scope ? Shape{1} : p_.scale_shape;
    r.scale = Tensor::empty(p_.scale_dtype, ss);
    if (p_.zero_kind) r.zero = Tensor::empty(p_.second_dtype, ss);
    for (size_t g = 0; g < scales.size(); ++g) {
      store_code(r.scale.mutable_data(), p_.scale_dtype, static_cast<int64_t>(g),
                 scales[g].scale_code, kp_.scale);
      if (p_.zero_kind)
        store_code(r.zero.mutable_data(), p_.second_dtype, static_cast<int64_t>(g),
                   scales[g].zero_code, kp_.second);
    }
    if (p_.multiscale) {
      r.tenscale = Tensor::empty(p_.second_dtype, {1});
      store_code(r.tenscale.mutable_data(), p_.second_dtype, 0, ts_.code, kp_.second);
    }
    return r;
  }

  std::vector<GroupScale> scales_of(const CastResult& r) override {
    CastResult a = r.mode == CastMode::Compress ? unpack(r) : r;
    if (a.codes.numel() != rows_ * cols_)
      throw Error("scales of " + a.dtype.str() + ": a result of shape " + shape_str(a.shape) +
                  " is not a cast of a [" + std::to_string(rows_) + ", " + std::to_string(cols_) +
                  "] weight");
    CastResult view = a;
    view.shape = {rows_, cols_};
    view.codes = a.codes.reshaped({rows_, cols_});
    view.options = p_.opt;
    view.options.mode = CastMode::Actual;
    cpu::validate_actual(view, p_);
    if (p_.multiscale) {
      ts_.code = load_code(a.tenscale.data(), p_.second_dtype, 0, kp_.second);
      ts_.t = scalar::decode_value(ts_.code, kp_.second);
      kp_.tensor_scale = ts_.t;
    }
    std::vector<GroupScale> out(static_cast<size_t>(groups()));
    for (int64_t g = 0; g < groups(); ++g) {
      const uint32_t sc = load_code(a.scale.data(), p_.scale_dtype, g, kp_.scale);
      const uint32_t zc =
          p_.zero_kind ? load_code(a.zero.data(), p_.second_dtype, g, kp_.second) : 0u;
      out[static_cast<size_t>(g)] = scale_from_codes(kp_, sc, zc);
    }
    return out;
  }

 private:
  static GroupScale choose_with(const KernelParams& kp, const float* v, int64_t n, double shrink) {
    GroupStats st;
    for (int64_t i = 0; i < n; ++i) st.add(static_cast<double>(v[i]));
    if (st.nonfinite) return choose_scale(kp, 0, 0, 0, true);
    return choose_scale(kp, st.absmax * shrink, st.lo * shrink, st.hi * shrink, false);
  }

  CastPlan p_;
  KernelParams kp_;
  TensorScale ts_;
};

}  // namespace

std::unique_ptr<ScaledQuantizer> standard_scaled_quantizer(const DataType& dtype,
                                                           const CastOptions& view_options,
                                                           int64_t rows, int64_t cols) {
  return std::make_unique<StandardQuantizer>(dtype, view_options, rows, cols);
}

}  // namespace castscope::detail
