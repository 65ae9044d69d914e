// Round to nearest through the family's quantizer: each group's scale from its own values, every
// value rounded with it. quantize(..., rtn) itself is the plain cast; these pieces serve the
// other methods and cast_with_scales, and tests/methods checks that together they give the
// cast's bits.
#include <cmath>

#include "castscope/error.hpp"
#include "families/family_table.hpp"
#include "methods/method.hpp"

namespace castscope::methods {

void gather_group(const ScaledQuantizer& q, const float* w, int64_t g, std::vector<float>& out) {
  const detail::GroupExtent e = q.extent(g);
  out.clear();
  for (int64_t r = e.row0; r < e.row1; ++r)
    out.insert(out.end(), w + r * q.cols() + e.col0, w + r * q.cols() + e.col1);
}

std::vector<GroupScale> choose_scales(const ScaledQuantizer& q, const float* w) {
  std::vector<GroupScale> s(static_cast<size_t>(q.groups()));
  std::vector<float> vals;
  for (int64_t g = 0; g < q.groups(); ++g) {
    gather_group(q, w, g, vals);
    s[static_cast<size_t>(g)] = q.choose(vals.data(), static_cast<int64_t>(vals.size()));
  }
  return s;
}

std::vector<uint32_t> round_with(const ScaledQuantizer& q, const float* w,
                                 const std::vector<GroupScale>& scales, float* out) {
  std::vector<uint32_t> codes(static_cast<size_t>(q.rows() * q.cols()));
  for (int64_t r = 0; r < q.rows(); ++r)
    for (int64_t c = 0; c < q.cols(); ++c) {
      const int64_t i = r * q.cols() + c;
      const float v = q.round(scales[static_cast<size_t>(q.group_of(r, c))], w[i],
                              static_cast<uint64_t>(i), &codes[static_cast<size_t>(i)]);
      if (out) out[i] = v;
    }
  return codes;
}

}  // namespace castscope::methods

namespace castscope {

CastResult cast_with_scales(const Tensor& x, const CastResult& scales) {
  if (x.shape() != scales.shape)
    throw Error("cast with given scales: the input's shape " + shape_str(x.shape()) +
                " is not that of the scales' cast " + shape_str(scales.shape));
  const methods::WeightView v = methods::weight_view(x, scales.options, "input", "cast");
  auto q = methods::quantizer_for(scales.dtype, v, "cast with given scales");
  const std::vector<methods::GroupScale> s = q->scales_of(scales);
  return q->result(v.shape, v.options, methods::round_with(*q, v.w.data(), s, nullptr), s);
}

CastResult cast_with_tensor_scale(const Tensor& x, const CastResult& like, float tensor_scale) {
  if (x.shape() != like.shape)
    throw Error("cast with a given tensor scale: the input's shape " + shape_str(x.shape()) +
                " is not that of the cast " + shape_str(like.shape));
  if (like.tenscale.numel() != 1)
    throw Error("cast with a given tensor scale: " + like.dtype.str() + " has no tensor scale");
  if (!(std::isfinite(tensor_scale) && tensor_scale > 0))
    throw Error("cast with a given tensor scale: the tensor scale " + std::to_string(tensor_scale) +
                " is not a positive finite number");
  const methods::WeightView v = methods::weight_view(x, like.options, "input", "cast");
  auto q = methods::quantizer_for(like.dtype, v, "cast with a given tensor scale");
  CastResult given = like;
  given.tenscale = Tensor::empty(DType::F32, like.tenscale.shape());
  given.tenscale.mutable_ptr<float>()[0] = tensor_scale;
  q->scales_of(given);  // sets the tensor scale the group scales are then chosen under
  const std::vector<methods::GroupScale> s = methods::choose_scales(*q, v.w.data());
  return q->result(v.shape, v.options, methods::round_with(*q, v.w.data(), s, nullptr), s);
}

}  // namespace castscope
