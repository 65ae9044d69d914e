// PlanTable to JSON and back (castscope/planner.hpp). The Python planner builds the table with
// activations and sensitivities only its runtimes can give; the CLI and the app solve and print
// it as they do their own, so the decoding must give back the same doubles, bit for bit.
#include <cmath>
#include <nlohmann/json.hpp>

#include "castscope/planner.hpp"

namespace castscope {
namespace {

using json = nlohmann::json;

// JSON has no infinities: a weight cast without error has an SNR of +inf.
json real(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

double real(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  throw Error("plan table: '" + j.dump() + "' is not a number");
}

json pairs(const std::vector<std::pair<std::string, std::string>>& v) {
  json a = json::array();
  for (const auto& [x, y] : v) a.push_back({x, y});
  return a;
}

std::vector<std::pair<std::string, std::string>> pairs(const json& j) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const json& e : j) v.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
  return v;
}

}  // namespace

std::string plan_table_to_json(const PlanTable& t) {
  json tensors = json::array();
  for (const PlanTensor& pt : t.tensors) {
    json opts = json::array();
    for (const PlanOption& o : pt.options)
      opts.push_back({{"candidate", o.candidate},
                      {"bits", o.bits},
                      {"error", real(o.error)},
                      {"weight_sse", real(o.weight_sse)},
                      {"snr_db", real(o.snr_db)}});
    tensors.push_back({{"name", pt.name},
                       {"shape", pt.shape},
                       {"numel", pt.numel},
                       {"axis", pt.axis},
                       {"predictor", pt.predictor},
                       {"role", real(pt.role)},
                       {"sensitivity", real(pt.sensitivity)},
                       {"energy", real(pt.energy)},
                       {"options", opts},
                       {"failed", pairs(pt.failed)}});
  }
  const json j = {{"candidates", t.candidates}, {"tensors", tensors},
                  {"values", t.values},         {"kept", pairs(t.kept)},
                  {"kept_bits", t.kept_bits},   {"activations", t.activations},
                  {"relative", t.relative}};
  return j.dump();
}

PlanTable plan_table_from_json(const std::string& text) {
  try {
    const json j = json::parse(text);
    PlanTable t;
    t.candidates = j.at("candidates").get<std::vector<std::string>>();
    for (const json& e : j.at("tensors")) {
      PlanTensor pt;
      pt.name = e.at("name").get<std::string>();
      pt.shape = e.at("shape").get<Shape>();
      pt.numel = e.at("numel").get<int64_t>();
      pt.axis = e.at("axis").get<std::string>();
      pt.predictor = e.at("predictor").get<std::string>();
      pt.role = real(e.at("role"));
      pt.sensitivity = real(e.at("sensitivity"));
      pt.energy = real(e.at("energy"));
      for (const json& o : e.at("options")) {
        PlanOption po;
        po.candidate = o.at("candidate").get<int>();
        if (po.candidate < 0 || static_cast<size_t>(po.candidate) >= t.candidates.size())
          throw Error("plan table: tensor '" + pt.name + "' names candidate " +
                      std::to_string(po.candidate) + " of " + std::to_string(t.candidates.size()));
        po.bits = o.at("bits").get<uint64_t>();
        po.error = real(o.at("error"));
        po.weight_sse = real(o.at("weight_sse"));
        po.snr_db = real(o.at("snr_db"));
        pt.options.push_back(po);
      }
      if (pt.options.empty()) throw Error("plan table: tensor '" + pt.name + "' has no options");
      pt.failed = pairs(e.at("failed"));
      t.tensors.push_back(std::move(pt));
    }
    t.values = j.at("values").get<int64_t>();
    t.kept = pairs(j.at("kept"));
    t.kept_bits = j.at("kept_bits").get<uint64_t>();
    t.activations = j.at("activations").get<std::string>();
    t.relative = j.at("relative").get<bool>();
    return t;
  } catch (const json::exception& e) {
    throw Error(std::string("plan table: not the JSON expected: ") + e.what());
  }
}

}  // namespace castscope
