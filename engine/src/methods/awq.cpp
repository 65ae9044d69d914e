// AWQ's scale search for one linear, as llm-compressor's AWQModifier runs it (duo scaling, its
// default): x_mean the mean |x| of each input channel over the calibration tokens, w_mean the
// mean over output rows of |W| normalized by its group's absmax (+ 1e-6); candidates s = 1
// (ratio 0, no duo scaling) and s = x_mean^r / (w_mean^(1-r) + 1e-4) for r = i / (grid - 2),
// i < grid - 1, each clamped to >= 1e-4 and divided by sqrt(max(s) min(s)); the candidate whose
// X (Q(W s) / s)^T is nearest X W^T (squared error) wins. The weight cast is of W * s, its
// round-to-nearest scales chosen by the family; s is the pre-quant scale inputs divide by.
#include <algorithm>
#include <cmath>

#include "castscope/error.hpp"
#include "methods/method.hpp"

namespace castscope::methods {

MethodResult awq(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m,
                 const std::vector<double>& x, int64_t tokens, const std::string& name) {
  const int64_t R = v.rows, C = v.cols;
  if (m.awq_grid < 2)
    throw Error("awq of '" + name + "': the grid needs at least 2 points (got " +
                std::to_string(m.awq_grid) + ")");
  std::vector<double> x_mean(static_cast<size_t>(C), 0.0), w_mean(static_cast<size_t>(C), 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < C; ++c) x_mean[c] += std::fabs(x[t * C + c]);
  for (double& a : x_mean) a /= static_cast<double>(tokens);
  for (int64_t g = 0; g < q.groups(); ++g) {
    const detail::GroupExtent e = q.extent(g);
    double amax = 0;
    for (int64_t r = e.row0; r < e.row1; ++r)
      for (int64_t c = e.col0; c < e.col1; ++c)
        amax = std::max(amax, std::fabs(static_cast<double>(v.w[r * C + c])));
    for (int64_t r = e.row0; r < e.row1; ++r)
      for (int64_t c = e.col0; c < e.col1; ++c)
        w_mean[c] += std::fabs(static_cast<double>(v.w[r * C + c])) / (amax + 1e-6);
  }
  for (double& a : w_mean) a /= static_cast<double>(R);

  std::vector<float> ws(static_cast<size_t>(R * C)), qv(static_cast<size_t>(R * C));
  std::vector<float> s(static_cast<size_t>(C)), best_s;
  double best = HUGE_VAL;
  const int n = m.awq_grid;
  for (int i = -1; i < n - 1; ++i) {
    const double ratio = i < 0 ? 0.0 : static_cast<double>(i) / (n - 2);
    double smax = 0, smin = HUGE_VAL;
    for (int64_t c = 0; c < C; ++c) {
      double sc = i < 0 ? std::pow(x_mean[c], ratio)
                        : std::pow(x_mean[c], ratio) / (std::pow(w_mean[c], 1 - ratio) + 1e-4);
      sc = std::max(sc, 1e-4);
      s[c] = static_cast<float>(sc);
      smax = std::max(smax, static_cast<double>(s[c]));
      smin = std::min(smin, static_cast<double>(s[c]));
    }
    const float norm = static_cast<float>(std::sqrt(smax * smin));
    for (float& a : s) a = std::isfinite(a / norm) ? a / norm : 1.0f;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) ws[r * C + c] = v.w[r * C + c] * s[c];
    q.choose_tensor_scale(ws.data(), R * C);
    const std::vector<GroupScale> sc = choose_scales(q, ws.data());
    round_with(q, ws.data(), sc, qv.data());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) qv[r * C + c] /= s[c];
    const double err = output_error(x, tokens, v.w.data(), qv.data(), R, C);
    if (err < best) {
      best = err;
      best_s = s;
    }
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) ws[r * C + c] = v.w[r * C + c] * best_s[c];
  q.choose_tensor_scale(ws.data(), R * C);
  const std::vector<GroupScale> sc = choose_scales(q, ws.data());
  MethodResult out;
  out.cast = q.result(v.shape, v.options, round_with(q, ws.data(), sc, nullptr), sc);
  out.pre_quant_scale = Tensor::empty(DType::F32, {C});
  std::copy(best_s.begin(), best_s.end(), out.pre_quant_scale.mutable_ptr<float>());
  out.output_error = best;
  return out;
}

}  // namespace castscope::methods
