// Methods in plans: a rule's "method" and its options, and the export's cast of a tensor with the
// method of the rule that matches it.
#include "io/plan_method.hpp"

#include <cmath>

#include "castscope/error.hpp"
#include "castscope/export.hpp"

namespace castscope::io::detail {

using nlohmann::json;

std::optional<MethodOptions> plan_rule_method(const json& r, const std::string& where) {
  if (!r.contains("method")) {
    if (r.contains("method_options"))
      throw Error(where + ": \"method_options\" needs a \"method\"");
    return std::nullopt;
  }
  if (!r["method"].is_string())
    throw Error(where + ": \"method\" must be a string (rtn | gptq | mse | awq | four-over-six)");
  MethodOptions m;
  try {
    m = parse_method_spec(r["method"].get<std::string>());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  if (!r.contains("method_options")) return m;
  const json& o = r["method_options"];
  if (!o.is_object()) throw Error(where + ": \"method_options\" must be an object");
  auto number = [&](const char* key, double lo, double hi) {
    const json& v = o[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
        v.get<double>() > hi)
      throw Error(where + ": \"method_options." + key + "\" must be a number in [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<double>();
  };
  auto integer = [&](const char* key) {
    const json& v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000000)
      throw Error(where + ": \"method_options." + key + "\" must be a positive integer");
    return static_cast<int>(v.get<int64_t>());
  };
  auto boolean = [&](const char* key) {
    if (!o[key].is_boolean())
      throw Error(where + ": \"method_options." + key + "\" must be true or false");
    return o[key].get<bool>();
  };
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& k = it.key();
    if (k == "damp")
      m.damp = number("damp", 0, 1e6);
    else if (k == "block")
      m.block = integer("block");
    else if (k == "act_order")
      m.act_order = boolean("act_order");
    else if (k == "static_groups")
      m.static_groups = boolean("static_groups");
    else if (k == "maxshrink")
      m.maxshrink = number("maxshrink", 0, 1);
    else if (k == "grid")
      m.grid = integer("grid");
    else if (k == "norm")
      m.norm = number("norm", 0, 1e3);
    else if (k == "four_over_six")
      m.four_over_six = boolean("four_over_six");
    else if (k == "awq_grid")
      m.awq_grid = integer("awq_grid");
    else
      throw Error(where + ": unknown key \"method_options." + k +
                  "\" (expected damp, block, act_order, static_groups, maxshrink, grid, norm, "
                  "four_over_six, awq_grid)");
  }
  return m;
}

void put_plan_rule_method(json& r, const MethodOptions& m) {
  r["method"] = to_string(m.method);
  json o = json::object();
  switch (m.method) {
    case Method::RTN:
      return;
    case Method::GPTQ:
      o = {{"damp", m.damp},
           {"block", m.block},
           {"act_order", m.act_order},
           {"static_groups", m.static_groups}};
      break;
    case Method::MSE:
      o = {{"maxshrink", m.maxshrink},
           {"grid", m.grid},
           {"norm", m.norm},
           {"four_over_six", m.four_over_six}};
      break;
    case Method::AWQ:
      o = {{"awq_grid", m.awq_grid}};
      break;
  }
  r["method_options"] = o;
}

}  // namespace castscope::io::detail

namespace castscope {

MethodOptions ExportPlan::method_for(const io::TensorInfo& info) const {
  if (!dtype_for(info)) return {};
  const int i = match(info);
  if (i < 0) return {};
  const std::optional<MethodOptions>& m = rules[static_cast<size_t>(i)].method;
  return m ? *m : MethodOptions{};
}

namespace exportdetail {

CastResult method_cast(const io::TensorInfo& info, const DataType& d, const Tensor& x,
                       const CastOptions& co, const ExportPlan& plan, const ExportOptions& opt,
                       Tensor* pre_quant_scale) {
  const MethodOptions m = plan.method_for(info);
  if (m.method == Method::RTN) return cast(x, d, co);
  if (m.method == Method::AWQ && !pre_quant_scale)
    throw Error(std::string("the ") + to_string(opt.layout) +
                " layout has no place for awq's pre-quant scale (the inputs' divisor per input "
                "channel): choose gptq, mse or rtn for this tensor, or export with a layout "
                "that stores it");
  Calibration calib;
  if (method_needs_calibration(m.method) && opt.calib) calib.inputs = opt.calib(info.name);
  MethodResult r = quantize(x, d, co, m, calib, info.name);
  if (pre_quant_scale) *pre_quant_scale = r.pre_quant_scale;
  // Methods give actual-mode codes; a layout that stores packed fields gets them packed.
  return co.mode == CastMode::Compress ? pack(r.cast) : std::move(r.cast);
}

}  // namespace exportdetail
}  // namespace castscope
