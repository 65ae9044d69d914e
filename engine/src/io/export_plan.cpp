// Per-layer export plans: tensor-name patterns to datatypes (docs/export-formats.md).
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "castscope/export.hpp"
#include "io/json_fields.hpp"
#include "io/plan_method.hpp"

namespace castscope {

using nlohmann::json;

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative matcher with one backtrack point for the last '*': linear in practice.
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  auto class_match = [&](size_t& i, char c) {
    // p[i] == '['; on return i is past the closing ']'.
    size_t j = i + 1;
    bool neg = j < p.size() && (p[j] == '!' || p[j] == '^');
    if (neg) ++j;
    bool ok = false, first = true;
    for (; j < p.size() && (first || p[j] != ']'); ++j, first = false) {
      if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
        ok |= c >= p[j] && c <= p[j + 2];
        j += 2;
      } else {
        ok |= c == p[j];
      }
    }
    i = j + 1;
    return ok != neg;
  };
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
      continue;
    }
    if (pi < p.size()) {
      if (p[pi] == '?') {
        ++pi;
        ++si;
        continue;
      }
      if (p[pi] == '[' && p.find(']', pi + 2) != std::string_view::npos) {
        size_t i = pi;
        if (class_match(i, s[si])) {
          pi = i;
          ++si;
          continue;
        }
      } else if (p[pi] == s[si]) {
        ++pi;
        ++si;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    pi = star + 1;
    si = ++mark;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

namespace {
bool rule_hits(const PlanRule& r, const std::string& name, int rank, bool embedding) {
  if (r.rank >= 0 && r.rank != rank) return false;
  if (r.weights && (rank < 2 || embedding)) return false;
  return r.re ? std::regex_search(name, *r.re) : glob_match(r.pattern, name);
}

int match_rule(const ExportPlan& plan, const std::string& name, int rank, bool embedding) {
  for (size_t i = 0; i < plan.rules.size(); ++i)
    if (!plan.rules[i].axis_only && rule_hits(plan.rules[i], name, rank, embedding))
      return static_cast<int>(i);
  return -1;
}
}  // namespace

int ExportPlan::match(const std::string& name, int rank) const {
  return match_rule(*this, name, rank, false);
}

int ExportPlan::match(const io::TensorInfo& info) const {
  return match_rule(*this, info.name, static_cast<int>(info.shape.size()), info.layout.embedding);
}

std::optional<DataType> ExportPlan::dtype_for(const io::TensorInfo& info) const {
  const DType d = exportdetail::stored_dtype(info);
  if (!dtype_is_float(d)) return std::nullopt;
  const int i = match(info);
  if (i >= 0) return rules[static_cast<size_t>(i)].target;
  // The default is a shortcut over the weights: norms, biases and embedding tables stay as
  // stored unless a rule names them.
  if (info.shape.size() < 2 || info.layout.embedding) return std::nullopt;
  return default_dtype;
}

Rotation ExportPlan::rotation_for(const io::TensorInfo& info) const {
  if (!dtype_for(info)) return {};
  const int i = match(info);
  return i >= 0 ? rules[static_cast<size_t>(i)].rotate : Rotation{};
}

std::optional<AxisSpec> ExportPlan::axis_for(const io::TensorInfo& info) const {
  for (const PlanRule& r : rules)
    if (r.axis_only &&
        rule_hits(r, info.name, static_cast<int>(info.shape.size()), info.layout.embedding))
      return r.axis;
  const int i = match(info);
  return i >= 0 ? rules[static_cast<size_t>(i)].axis : std::nullopt;
}

namespace {

std::optional<DataType> parse_target(const std::string& text, const std::string& where) {
  if (text == "keep") return std::nullopt;
  try {
    return DataType::parse(text);
  } catch (const Error& e) {
    throw Error(where + ": unknown datatype '" + text + "' (" + e.what() + ")");
  }
}

// "budget": {"bits_per_weight", "bits", "values"}, "predicted": {"bits", "error", "predictor"}:
// written together by the budget planner.
PlanBudget parse_budget(const json& j, const std::string& source) {
  const std::string where = "plan '" + source + "'";
  if (!j.contains("budget") || !j.contains("predicted") || !j["budget"].is_object() ||
      !j["predicted"].is_object())
    throw Error(where + ": \"budget\" and \"predicted\" go together, each an object");
  const json& b = j["budget"];
  const json& p = j["predicted"];
  auto number = [&](const json& o, const char* key, const std::string& in) {
    if (!o.contains(key) || !o[key].is_number() || !std::isfinite(o[key].get<double>()) ||
        o[key].get<double>() < 0)
      throw Error(where + ": \"" + in + "\" needs \"" + key + "\", a non-negative number");
    return o[key].get<double>();
  };
  auto count = [&](const json& o, const char* key, const std::string& in) {
    if (!o.contains(key))
      throw Error(where + ": \"" + in + "\" needs \"" + key + "\", a non-negative integer");
    return io::detail::json_unsigned(o[key], "", where + ": \"" + in + "." + key + "\"");
  };
  PlanBudget r;
  r.bits_per_weight = number(b, "bits_per_weight", "budget");
  r.budget_bits = count(b, "bits", "budget");
  r.values = static_cast<int64_t>(count(b, "values", "budget"));
  r.plan_bits = count(p, "bits", "predicted");
  r.predicted_error = number(p, "error", "predicted");
  if (p.contains("predictor")) {
    if (!p["predictor"].is_string())
      throw Error(where + ": \"predicted.predictor\" must be a string");
    r.predictor = p["predictor"].get<std::string>();
  }
  return r;
}

}  // namespace

ExportPlan parse_plan(const std::string& text, const std::string& source) {
  ExportPlan plan;
  plan.source = source;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("plan '" + source + "': invalid JSON (" + e.what() + ")");
  }
  if (!j.is_object())
    throw Error("plan '" + source + "': expected a JSON object with \"default\" and \"rules\"");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "default" && it.key() != "rules" && it.key() != "comment" &&
        it.key() != "budget" && it.key() != "predicted")
      throw Error("plan '" + source + "': unknown key \"" + it.key() +
                  "\" (expected default, rules, comment, budget, predicted)");
  if (j.contains("budget") || j.contains("predicted")) plan.budget = parse_budget(j, source);
  if (j.contains("default")) {
    if (!j["default"].is_string())
      throw Error("plan '" + source + "': \"default\" must be a string (\"keep\" or a datatype)");
    plan.default_text = j["default"].get<std::string>();
    plan.default_dtype = parse_target(plan.default_text, "plan '" + source + "': default");
  }
  if (j.contains("rules")) {
    if (!j["rules"].is_array()) throw Error("plan '" + source + "': \"rules\" must be an array");
    int idx = 0;
    for (const json& r : j["rules"]) {
      const std::string where = "plan '" + source + "': rule " + std::to_string(idx++);
      // A rule without "dtype" overrides the axis only (plans before such rules always had it).
      if (!r.is_object() || !r.contains("pattern") || !r["pattern"].is_string() ||
          (r.contains("dtype") ? !r["dtype"].is_string() : !r.contains("axis")))
        throw Error(where +
                    ": expected {\"pattern\": \"...\", \"dtype\": \"...\"} or, to override "
                    "the axis only, {\"pattern\": \"...\", \"axis\": \"...\"}");
      for (auto it = r.begin(); it != r.end(); ++it)
        if (it.key() != "pattern" && it.key() != "dtype" && it.key() != "rank" &&
            it.key() != "rotate" && it.key() != "axis" && it.key() != "weights" &&
            it.key() != "method" && it.key() != "method_options")
          throw Error(where + ": unknown key \"" + it.key() +
                      "\" (expected pattern, dtype, rank, weights, rotate, axis, method, "
                      "method_options)");
      PlanRule rule;
      rule.pattern = r["pattern"].get<std::string>();
      rule.axis_only = !r.contains("dtype");
      if (!rule.axis_only) rule.dtype = r["dtype"].get<std::string>();
      if (rule.pattern.empty()) throw Error(where + ": empty pattern");
      if (r.contains("rank")) {
        rule.rank =
            static_cast<int>(io::detail::json_integer(r["rank"], "", where + ": \"rank\"", 0, 64));
      }
      if (r.contains("weights")) {
        if (!r["weights"].is_boolean()) throw Error(where + ": \"weights\" must be true or false");
        rule.weights = r["weights"].get<bool>();
      }
      if (!rule.axis_only) rule.target = parse_target(rule.dtype, where);
      rule.method = io::detail::plan_rule_method(r, where);
      if (rule.method && rule.axis_only) throw Error(where + ": \"method\" needs a \"dtype\"");
      if (r.contains("rotate")) {
        if (rule.axis_only) throw Error(where + ": \"rotate\" needs a \"dtype\"");
        const json& v = r["rotate"];
        if (!v.is_string() && !v.is_number_unsigned())
          throw Error(where +
                      ": \"rotate\" must be a block size (16..256) or a string like "
                      "\"h128\" / \"h128r7\"");
        try {
          rule.rotate = parse_rotation(v.is_string() ? v.get<std::string>()
                                                     : std::to_string(v.get<uint64_t>()));
        } catch (const Error& e) {
          throw Error(where + ": \"rotate\": " + e.what());
        }
      }
      if (r.contains("axis")) {
        // Plans without it (all written before axis choices existed) take the command's axis.
        const json& v = r["axis"];
        if (!v.is_string() && !v.is_number_integer())
          throw Error(where + ": \"axis\" must be \"auto\", an integer or a string like \"1:\"");
        try {
          rule.axis = AxisSpec::parse(v.is_string() ? v.get<std::string>()
                                                    : std::to_string(v.get<int64_t>()));
        } catch (const Error& e) {
          throw Error(where + ": \"axis\": " + e.what());
        }
      }
      if (rule.pattern.rfind("re:", 0) == 0) {
        try {
          rule.re = std::make_shared<std::regex>(rule.pattern.substr(3), std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          throw Error(where + ": bad regular expression '" + rule.pattern.substr(3) + "' (" +
                      e.what() + ")");
        }
      }
      plan.rules.push_back(std::move(rule));
    }
  }
  return plan;
}

ExportPlan load_plan(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("plan '" + path + "': cannot open for reading");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_plan(ss.str(), path);
}

std::string plan_to_json(const ExportPlan& plan) {
  json j = json::object();
  j["default"] = plan.default_dtype ? plan.default_dtype->str() : std::string("keep");
  j["rules"] = json::array();
  for (const PlanRule& r : plan.rules) {
    json o = {{"pattern", r.pattern}};
    if (!r.axis_only) o["dtype"] = r.target ? r.target->str() : std::string("keep");
    if (r.rank >= 0) o["rank"] = r.rank;
    if (r.weights) o["weights"] = true;
    if (r.rotate.enabled()) o["rotate"] = r.rotate.str();
    if (r.method) io::detail::put_plan_rule_method(o, *r.method);
    if (r.axis) {
      if (!r.axis->automatic && !r.axis->flatten && !r.axis->lead)
        o["axis"] = r.axis->axis;
      else
        o["axis"] = r.axis->str();
    }
    j["rules"].push_back(o);
  }
  if (plan.budget) {
    const PlanBudget& b = *plan.budget;
    const double v = static_cast<double>(b.values > 0 ? b.values : 1);
    j["budget"] = {
        {"bits_per_weight", b.bits_per_weight}, {"bits", b.budget_bits}, {"values", b.values}};
    j["predicted"] = {{"bits", b.plan_bits},
                      {"bits_per_weight", static_cast<double>(b.plan_bits) / v},
                      {"error", b.predicted_error},
                      {"predictor", b.predictor}};
  }
  return j.dump(2) + "\n";
}

void save_plan(const std::string& path, const ExportPlan& plan) {
  const std::string s = plan_to_json(plan);
  io::write_atomically(path, [&](const auto& put) { put(s.data(), s.size()); });
}

ExportPlan plan_for_dtype(const std::string& dtype) {
  const std::string text =
      json({{"default", "keep"},
            {"rules", {{{"pattern", "*"}, {"dtype", dtype}, {"weights", true}}}}})
          .dump();
  return parse_plan(text, "--dtype " + dtype);
}

ExportPlan axis_override_plan(const std::vector<std::string>& specs) {
  json rules = json::array();
  for (const std::string& s : specs) {
    const size_t eq = s.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw Error("--axis-for '" + s + "': expected PATTERN=AXIS, e.g. 'deconv*=:0'");
    try {
      AxisSpec::parse(s.substr(eq + 1));
    } catch (const Error& e) {
      throw Error("--axis-for '" + s + "': " + e.what());
    }
    rules.push_back({{"pattern", s.substr(0, eq)}, {"axis", s.substr(eq + 1)}});
  }
  return parse_plan(json({{"default", "keep"}, {"rules", rules}}).dump(), "--axis-for");
}

ExportPlan with_axis_overrides(const ExportPlan& plan, const ExportPlan& overrides) {
  json j = json::parse(plan_to_json(plan));
  json rules = json::array();
  const json o = json::parse(plan_to_json(overrides));
  for (const auto& r : o["rules"])
    if (!r.contains("dtype")) rules.push_back(r);
  for (const auto& r : j["rules"]) rules.push_back(r);
  j["rules"] = rules;
  return parse_plan(j.dump(), plan.source);
}

namespace {
// The model's tensors with the plan's overrides; *any tells whether one applied.
std::vector<io::TensorInfo> overridden_infos(const io::Model& model, const ExportPlan& plan,
                                             bool* any) {
  std::vector<io::TensorInfo> infos = model.tensors();
  *any = false;
  for (io::TensorInfo& t : infos) {
    const int rank = static_cast<int>(t.shape.size());
    for (size_t i = 0; i < plan.rules.size(); ++i) {
      const PlanRule& r = plan.rules[i];
      if (!r.axis_only || !rule_hits(r, t.name, rank, t.layout.embedding)) continue;
      if (!r.axis || r.axis->automatic || rank == 0) break;  // the file's layout stays
      try {
        const std::string was = t.layout.empty() ? std::string("none") : t.layout.layout;
        ResolvedLayout l = make_layout("override " + r.axis->str(), *r.axis, t.shape,
                                       "axis " + r.axis->str() + " set by " + plan.source +
                                           " rule " + std::to_string(i) + " ('" + r.pattern +
                                           "'); the file's layout: " + was);
        l.embedding = t.layout.embedding;
        t.layout = l;
      } catch (const Error& e) {
        throw Error("tensor '" + t.name + "' of '" + model.path() + "': " + e.what());
      }
      *any = true;
      break;
    }
  }
  return infos;
}
}  // namespace

std::unique_ptr<io::Model> with_layout_overrides(std::unique_ptr<io::Model> model,
                                                 const ExportPlan& plan) {
  bool any = false;
  std::vector<io::TensorInfo> infos = overridden_infos(*model, plan, &any);
  if (!any) return model;
  return io::relist(std::move(model), std::move(infos));
}

std::shared_ptr<const io::Model> with_layout_overrides(std::shared_ptr<const io::Model> model,
                                                       const ExportPlan& plan) {
  bool any = false;
  std::vector<io::TensorInfo> infos = overridden_infos(*model, plan, &any);
  if (!any) return model;
  return io::relist(std::move(model), std::move(infos));
}

}  // namespace castscope
