// castscope-cli list | info: the registry and every property of a datatype.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <regex>

#include "castscope/datatype.hpp"
#include "castscope/export.hpp"
#include "cli/command.hpp"
#include "cli/tensor_bits.hpp"

namespace castscope::cli {
namespace {

using nlohmann::json;

json number_json(const NumberSpec& n, bool codes) {
  json j;
  j["name"] = n.name();
  const char* kinds[] = {"float", "int", "uint", "exponent"};
  j["kind"] = kinds[static_cast<int>(n.kind())];
  j["bits"] = n.bits();
  j["exponent_bits"] = n.ebits();
  j["mantissa_bits"] = n.mbits();
  auto num = [](double v) {
    return std::isfinite(v) ? json(v) : json(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
  };
  if (n.is_float() || n.is_exponent()) {
    j["bias"] = n.bias();
    j["emax"] = n.emax();
    j["emin"] = n.emin();
    j["infnan"] = to_string(n.infnan());
    j["min_normal"] = num(n.min_normal());
    j["min_subnormal"] = num(n.min_subnormal());
  }
  if (n.is_float()) {
    j["midmax"] = num(n.midmax());
    j["eps"] = num(n.eps());
  }
  j["max"] = num(n.max());
  if (n.is_int() || n.is_uint()) {
    j["int_min"] = n.int_min();
    j["int_max"] = n.int_max();
    if (n.is_int()) j["fixed_point_step"] = num(n.min_subnormal());
  }
  j["inf"] = n.inf_encoding();
  j["nan"] = n.nan_encoding();
  j["torch"] = n.torch_name();
  j["cuda"] = n.cuda_name();
  if (codes && n.bits() <= 8) {
    json arr = json::array();
    for (const CodeValue& cv : n.enumerate())
      arr.push_back({{"code", cv.code}, {"value", num(cv.value)}, {"note", cv.note}});
    j["codes"] = arr;
  }
  return j;
}

void print_number(const NumberSpec& n, const char* role, bool codes) {
  std::printf("%s format %s\n", role, n.name().c_str());
  const json j = number_json(n, false);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "name") continue;
    std::string v = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    if (it.value().is_number_float()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.10g", it.value().get<double>());
      v = buf;
    }
    if (v.empty()) v = "-";
    std::printf("  %-16s %s\n", it.key().c_str(), v.c_str());
  }
  if (codes && n.bits() <= 8) {
    std::printf("  codes:\n");
    for (const CodeValue& cv : n.enumerate()) {
      std::printf("    0x%02X  %-14.9g %s\n", cv.code, cv.value, cv.note.c_str());
    }
  }
}

// The tensors `list --model` shows a datatype's cost on: the floating-point ones, filtered.
std::vector<const io::TensorInfo*> list_tensors(const io::Model& m, const std::string& filter) {
  std::optional<std::regex> re;
  if (!filter.empty()) {
    try {
      re.emplace(filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("--filter '" + filter + "' is not a valid regular expression (" + e.what() + ")");
    }
  }
  std::vector<const io::TensorInfo*> out;
  for (const io::TensorInfo& t : m.tensors())
    if (io::is_float_storage(t.dtype) && numel(t.shape) > 0 &&
        (!re || std::regex_search(t.name, *re)))
      out.push_back(&t);
  return out;
}

void list_cmd(CLI::App& app) {
  auto* sub = app.add_subcommand("list", "List the predefined datatypes");
  static bool as_json = false;
  static std::string model, filter, axis = "auto";
  static std::vector<std::string> axis_for;
  sub->add_flag("--json", as_json, "Print JSON");
  sub->add_option("--model", model,
                  "Also each datatype's exact bits per value on every floating-point tensor of "
                  "this model, along the tensor's resolved axis");
  sub->add_option("--filter", filter, "With --model: only tensors whose name matches this regex");
  add_axis_option(sub, axis);
  add_axis_for_option(sub, axis_for);
  sub->callback([] {
    std::unique_ptr<io::Model> m;
    std::vector<const io::TensorInfo*> ts;
    const CastOptions o = parse_cast_options({.axis = axis});
    if (!model.empty()) {
      m = with_layout_overrides(io::open_model(model), axis_override_plan(axis_for));
      ts = list_tensors(*m, filter);
    } else if (!filter.empty() || !axis_for.empty()) {
      throw Error("list: --filter and --axis-for need --model");
    }
    if (as_json) {
      json arr = json::array();
      for (const RegistryEntry& e : registry()) {
        DataType d = DataType::parse(e.name);
        // bits_per_value stays the nominal figure earlier versions wrote; the tensors' own
        // figures are storage_bits'.
        json j = {{"name", e.name},
                  {"spec", e.spec},
                  {"group", e.group},
                  {"description", e.description},
                  {"bits_per_value", d.bits_per_value()},
                  {"nominal_bits_per_value", d.bits_per_value()}};
        if (m) {
          j["tensors"] = json::array();
          for (const io::TensorInfo* t : ts) {
            json jt = tensor_bits_json<json>(tensor_bits(d, *t, o));
            jt["name"] = t->name;
            jt["shape"] = t->shape;
            j["tensors"].push_back(jt);
          }
        }
        arr.push_back(j);
      }
      std::printf("%s\n", arr.dump(2).c_str());
      return;
    }
    std::string group;
    size_t w = 4;
    for (const io::TensorInfo* t : ts) w = std::max(w, t->name.size());
    for (const RegistryEntry& e : registry()) {
      if (e.group != group) {
        group = e.group;
        std::printf("%s%s\n", group == registry().front().group ? "" : "\n", group.c_str());
      }
      DataType d = DataType::parse(e.name);
      std::printf("  %-16s %-30s nominal %6.3g bits  %s\n", e.name.c_str(), e.spec.c_str(),
                  d.bits_per_value(), e.description.c_str());
      for (const io::TensorInfo* t : ts)
        std::printf("      %-*s  %-20s  %s bits per value\n", static_cast<int>(w), t->name.c_str(),
                    shape_str(t->shape).c_str(), tensor_bits_text(tensor_bits(d, *t, o)).c_str());
    }
  });
}

void info_cmd(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "info", "Show every property of a datatype (and all codes of formats of at most 8 bits)");
  static std::string spec;
  static bool as_json = false;
  sub->add_option("dtype", spec, "Datatype string or registry name")->required();
  sub->add_flag("--json", as_json, "Print JSON");
  sub->callback([] {
    const DataType d = DataType::parse(spec);
    if (as_json) {
      json j;
      j["name"] = d.name();
      j["spec"] = d.str();
      j["description"] = d.describe();
      j["bits_per_value"] = d.bits_per_value();
      j["number"] = number_json(d.number(), true);
      if (const auto& cb = d.codebook()) {
        json maps = json::array();
        for (size_t m = 0; m < cb->maps.size(); ++m)
          maps.push_back({{"name", cb->names[m]}, {"values", cb->maps[m]}});
        j["codebook"] = {{"spec", cb->str()},
                         {"implicit", cb->implicit},
                         {"index_bits", cb->index_bits},
                         {"meta_bits", cb->meta_bits},
                         {"mappings", maps}};
      }
      if (d.scaled()) {
        const ScaleSpec& sc = *d.scale();
        j["scale"] = number_json(sc.scale, true);
        if (sc.second)
          j[d.has_zero_point() ? "zero_point" : "tensor_scale"] = number_json(*sc.second, true);
        json tiles = json::array();
        for (const TileSpec& t : sc.tiles)
          tiles.push_back({{"size", t.size},
                           {"channel", t.channel()},
                           {"subtile", t.sub},
                           {"offset_bits", t.offset},
                           {"n", t.n},
                           {"m", t.m}});
        j["tiles"] = tiles;
      }
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    std::printf("datatype %s\n  %s\n  nominal bits per value %.6g%s\n\n", d.label().c_str(),
                d.describe().c_str(), d.bits_per_value(),
                d.tensor_scaled() ? " (plus one tensor scale)"
                : d.multiscale()  ? " (plus the tensor scale)"
                                  : "");
    if (const auto& cb = d.codebook()) {
      std::printf("codebook %s: %d mappings of %d %s values (index = entry, ascending)\n",
                  cb->str().c_str(), cb->num_maps(), cb->num_values(), d.number().name().c_str());
      for (size_t m = 0; m < cb->maps.size(); ++m) {
        std::printf("  %2zu %-8s", m, cb->names[m].c_str());
        for (int j = cb->num_values() / 2; j < cb->num_values(); ++j)
          std::printf(" %g", cb->maps[m][j]);
        std::printf("  (and negatives)\n");
      }
      std::printf("\n");
    }
    print_number(d.number(), d.codebook() ? "compute" : "element", true);
    if (d.scaled()) {
      const ScaleSpec& sc = *d.scale();
      std::printf("\n");
      print_number(sc.scale, "scale", false);
      if (sc.second) {
        std::printf("\n");
        print_number(*sc.second, d.has_zero_point() ? "zero point" : "tensor scale", false);
      }
    }
  });
}

Register reg_list(list_cmd);
Register reg_info(info_cmd);

}  // namespace
}  // namespace castscope::cli
