// Resolved quantization layouts: the rule by rank, the 2-D view, and the cast options a tensor's
// layout gives. The rules that read files live in io/layout_rules.cpp and io/onnx_layout.cpp.
#include "castscope/layout.hpp"

#include "castscope/error.hpp"

namespace castscope {

ResolvedLayout default_layout(const Shape& shape) {
  ResolvedLayout l;
  l.axis = default_axis(shape);
  if (shape.size() <= 1) {
    l.layout = "vector";
    l.reason = "one axis";
    l.guessed = false;
    return l;
  }
  if (shape.size() == 4 || shape.size() == 5) {
    l.layout = "conv [O, I/g, k...]";
    l.reason = "layout guessed from the rank (nothing in the file shows it)";
  } else {
    l.layout = "rows [out, in]";
    l.reason = "layout guessed: the last axis (nothing in the file shows it)";
  }
  l.guessed = true;
  return l;
}

ResolvedLayout make_layout(const std::string& name, const AxisSpec& axis, const Shape& shape,
                           const std::string& reason, bool guessed) {
  CastOptions o;
  axis.apply(o);
  o.axis_auto = false;
  const int rank = static_cast<int>(shape.size());
  if (!o.flatten && rank > 0 && (o.axis >= rank || o.axis < -rank))
    throw Error("quantization axis " + axis.str() + " is out of range for a tensor of rank " +
                std::to_string(rank) + " (shape " + shape_str(shape) + ")");
  ResolvedLayout l;
  l.layout = name;
  l.axis = AxisSpec::from(resolve_axis(o, shape));  // throws for an axis out of range
  l.reason = reason;
  l.guessed = guessed;
  return l;
}

Shape layout_view(const Shape& shape, const AxisSpec& axis) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {1, shape[0]};
  CastOptions o;
  axis.apply(o);
  if (o.axis_auto) default_axis(shape).apply(o);
  const CastOptions r = resolve_axis(o, shape);
  const int rank = static_cast<int>(shape.size());
  const Shape v = cast_view_shape(shape, r);
  if (r.lead) return {v[1], v[0]};
  if (r.flatten) {
    int64_t out = 1;
    for (size_t i = 0; i + 1 < v.size(); ++i) out *= v[i];
    return {out, v.back()};
  }
  const int ax = ((r.axis % rank) + rank) % rank;
  int64_t out = 1;
  for (int i = 0; i < rank; ++i)
    if (i != ax) out *= shape[i];
  return {out, shape[ax]};
}

CastOptions options_for(const CastOptions& o, const Shape& shape, const ResolvedLayout& layout) {
  CastOptions r = o;
  if (r.axis_auto && !layout.empty() && !shape.empty()) layout.axis.apply(r);
  return resolve_axis(r, shape);
}

std::string describe_layout(const ResolvedLayout& l, const Shape& shape) {
  if (l.empty()) return "-";
  CastOptions o;
  l.axis.apply(o);
  std::string s = l.layout + ": axis " + describe_axis(o, shape);
  const Shape v = layout_view(shape, l.axis);
  s += ", view [" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "]";
  if (l.guessed) s += " (layout guessed)";
  if (l.conflict) s += " (consumers disagree)";
  return s + "; " + l.reason;
}

}  // namespace castscope
