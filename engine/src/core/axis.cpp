// Quantization-axis settings: parsing, the default rule, and the flattened view a cast runs on.
#include <charconv>

#include "castscope/cast.hpp"
#include "castscope/error.hpp"

namespace castscope {

std::string AxisSpec::str() const {
  if (automatic) return "auto";
  if (lead) return ":" + std::to_string(axis);
  return std::to_string(axis) + (flatten ? ":" : "");
}

AxisSpec AxisSpec::parse(std::string_view s) {
  AxisSpec a;
  if (s == "auto") {
    a.automatic = true;
    return a;
  }
  std::string_view num = s;
  if (!num.empty() && num.front() == ':') {
    a.flatten = a.lead = true;
    num.remove_prefix(1);
  } else if (!num.empty() && num.back() == ':') {
    a.flatten = true;
    num.remove_suffix(1);
  }
  const char* end = num.data() + num.size();
  auto [p, ec] = std::from_chars(num.data(), end, a.axis);
  if (num.empty() || ec != std::errc() || p != end || a.axis < -64 || a.axis > 64)
    throw Error("axis '" + std::string(s) +
                "': expected auto, an axis (-1: the last) or an axis followed by ':' (that axis "
                "and every later one flattened into one, e.g. 1: for a conv weight) or ':' "
                "followed by an axis (axes 0 to it flattened, e.g. :2 for a Keras kernel)");
  return a;
}

AxisSpec default_axis(const Shape& shape) {
  if (shape.size() == 4 || shape.size() == 5) return {false, 1, true};
  return {false, -1, false};
}

CastOptions resolve_axis(const CastOptions& o, const Shape& shape) {
  CastOptions r = o;
  if (r.axis_auto) {
    default_axis(shape).apply(r);
    r.axis_auto = false;
  }
  if (!r.flatten) return r;
  const int rank = static_cast<int>(shape.size());
  const int ax = r.axis < 0 ? r.axis + rank : r.axis;
  if (ax < 0 || ax >= rank)
    throw Error("quantization axis " + AxisSpec::from(o).str() +
                " is out of range for a tensor of rank " + std::to_string(rank) + " (shape " +
                shape_str(shape) + ")");
  if (r.lead) {
    r.axis = ax;
    if (ax == 0 && rank <= 2) r.flatten = r.lead = false;  // the view is the tensor: plain axis 0
    return r;
  }
  if (ax == rank - 1) {
    r.flatten = false;  // nothing to merge: the plain last axis, as files without the key say
    return r;
  }
  r.axis = ax;
  return r;
}

Shape cast_view_shape(const Shape& shape, const CastOptions& o) {
  if (!o.flatten) return shape;
  const int rank = static_cast<int>(shape.size());
  const int ax = o.axis < 0 ? o.axis + rank : o.axis;
  if (ax < 0 || ax >= rank)
    throw Error("flattened axis " + std::to_string(o.axis) + " is out of range for shape " +
                shape_str(shape));
  if (o.lead) {
    int64_t red = 1, out = 1;
    for (int i = 0; i < rank; ++i) (i <= ax ? red : out) *= shape[i];
    return {red, out};
  }
  Shape v(shape.begin(), shape.begin() + ax);
  int64_t n = 1;
  for (int i = ax; i < rank; ++i) n *= shape[i];
  v.push_back(n);
  return v;
}

CastOptions view_options(const CastOptions& o) {
  CastOptions v = o;
  v.axis = o.lead ? 0 : -1;
  v.flatten = false;
  v.lead = false;
  v.axis_auto = false;
  return v;
}

int64_t axis_length(const CastOptions& o, const Shape& shape) {
  if (shape.empty()) return 1;
  const CastOptions r = resolve_axis(o, shape);
  if (r.lead) return cast_view_shape(shape, r).front();
  if (r.flatten) return cast_view_shape(shape, r).back();
  const int rank = static_cast<int>(shape.size());
  const int ax = ((r.axis % rank) + rank) % rank;
  return shape[ax];
}

std::string describe_axis(const CastOptions& o, const Shape& shape) {
  if (shape.empty()) return "-";
  const CastOptions r = resolve_axis(o, shape);
  const std::string len = std::to_string(axis_length(r, shape));
  // Axes 0 to 0 are axis 0 alone (a ConvTranspose weight [Cin, Cout/g, k...] over Cin).
  if (r.lead) return (r.axis == 0 ? "0" : "0.." + std::to_string(r.axis)) + ":" + len;
  if (r.flatten)
    return std::to_string(r.axis) + ".." + std::to_string(shape.size() - 1) + ":" + len;
  return std::to_string(r.axis) + ":" + len;
}

CastResult as_view(const CastResult& result) {
  if (!result.options.flatten) return result;
  CastResult v = result;
  v.shape = cast_view_shape(result.shape, result.options);
  v.options = view_options(result.options);
  if (v.values) v.values = v.values.reshaped(v.shape);
  return v;
}

}  // namespace castscope
