// castscope-cli map MODEL --dtype D [--dtype D2 ...]: the model map grid (tensors x datatypes).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "castscope/export.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/metrics_json.hpp"
#include "castscope/modelmap.hpp"
#include "cli/command.hpp"
#include "cli/opt_method.hpp"

namespace castscope::cli {
namespace {

using nlohmann::ordered_json;

struct MapArgs {
  std::string model, metric = "snr", activations, act_dtype, round = "even", scale_mode = "floor",
                     device = "auto", filter, rotate = "none", axis = "auto";
  std::vector<std::string> dtypes;
  int64_t tokens = 64;
  bool json = false, csv = false, embeddings = false;
  std::vector<std::string> axis_for;
  MethodArgs method;
};

std::atomic<JobControl*> g_job{nullptr};
void map_on_sigint(int) {
  if (JobControl* j = g_job.load()) j->cancel = true;
}

ordered_json num(double v) {
  return metrics_json::number<ordered_json>(v);
}

std::string csv_quote(std::string s) {
  for (char& c : s)
    if (c == '"') c = '\'';
  return "\"" + s + "\"";
}

// "synthetic[:TOKENSxFEATURES[:OUTLIERS[:SCALE[:SEED]]]]" or a file.
Tensor open_activations(const std::string& spec, int64_t features_hint) {
  if (spec.rfind("synthetic", 0) != 0) return load_activations(spec);
  int64_t tokens = 64, features = features_hint;
  int outliers = 8;
  double scale = 50;
  unsigned long long seed = 1;
  const std::string rest = spec.size() > 9 ? spec.substr(9) : "";
  long long t = 0, f = 0;
  int used = 0;
  if (!rest.empty()) {
    const int n = std::sscanf(rest.c_str(), ":%lldx%lld%n", &t, &f, &used);
    if (n < 2)
      throw Error("--activations '" + spec +
                  "': expected synthetic[:TxF[:OUTLIERS[:SCALE[:SEED]]]]");
    tokens = t;
    features = f;
    const std::string more = rest.substr(static_cast<size_t>(used));
    if (!more.empty() && std::sscanf(more.c_str(), ":%d:%lf:%llu", &outliers, &scale, &seed) < 1)
      throw Error("--activations '" + spec +
                  "': expected synthetic[:TxF[:OUTLIERS[:SCALE[:SEED]]]]");
  }
  if (features <= 0)
    throw Error("--activations synthetic: give the feature count (synthetic:TOKENSxFEATURES)");
  return synthetic_activations(tokens, features, outliers, scale, seed);
}

void map_cmd(CLI::App& app) {
  static MapArgs a;
  auto* sub = app.add_subcommand(
      "map", "Model map: every quantizable tensor x every datatype, one metric per cell");
  sub->add_option("model", a.model, "Model: file, directory or *.safetensors.index.json")
      ->required();
  sub->add_option("--dtype,-d", a.dtypes, "Datatype column (repeat for several)")->required();
  sub->add_option("--metric", a.metric,
                  "snr | relerr | maxerr | clipped | outsnr (output SNR, needs --activations)")
      ->check(CLI::IsMember({"snr", "relerr", "maxerr", "clipped", "outsnr"}));
  sub->add_option("--activations", a.activations,
                  "Activations [tokens, in] (.npy / .safetensors) or "
                  "synthetic[:TxF[:OUTLIERS[:SCALE[:SEED]]]]: adds the matmul output SNR of "
                  "every weight [out, in] and the product that computed it (cuBLASLt FP8 / "
                  "TCFP on the tensor cores, bf16 / fp32 GEMM, or fp32 on the CPU)");
  sub->add_option("--act-dtype", a.act_dtype,
                  "Datatype of the activations (default: the column's; 'keep' for float32)");
  sub->add_option("--tokens", a.tokens, "Activation rows used (0: all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--rotate", a.rotate,
                  "Block Hadamard rotation before casting: N, hN or hNrSEED, N in 16..256");
  add_rounding_options(sub, a.round, a.scale_mode);
  add_axis_option(sub, a.axis);
  add_axis_for_option(sub, a.axis_for);
  add_device_option(sub, a.device);
  sub->add_option("--filter", a.filter, "Only tensors whose name matches this regular expression");
  sub->add_flag("--embeddings", a.embeddings, "Include token / position embeddings");
  add_method_options(sub, a.method, true);
  sub->add_flag("--json", a.json, "Print JSON");
  sub->add_flag("--csv", a.csv, "Print CSV");
  sub->callback([] {
    if (a.json == a.csv) throw Error("map: choose one of --csv and --json");
    MapOptions o;
    o.dtypes = a.dtypes;
    // mode, round, scale mode, overflow, axis, rotate, device
    o.cast =
        parse_cast_options({"", a.round, a.scale_mode, "", a.axis, a.rotate, a.device}, o.cast);
    o.filter = a.filter;
    o.include_embeddings = a.embeddings;
    o.max_tokens = a.tokens;
    const MapMetric metric = parse_map_metric(a.metric);
    for (const std::string& name : a.method.methods) {
      MethodOptions m = a.method.opt;
      m.method = parse_method(name);
      o.methods.push_back(m);
    }
    // Calibration inputs keyed by weight name, read one at a time as their rows come.
    const bool calib = !a.method.calib.empty();
    if (calib) o.calib = calib_by_name(a.method.calib);
    auto model = with_layout_overrides(io::open_model(a.model), axis_override_plan(a.axis_for));
    if (!a.activations.empty()) {
      int64_t hint = 0;
      for (const io::TensorInfo& t : model->tensors())
        if (t.shape.size() == 2 && io::is_float_storage(t.dtype)) {
          hint = t.shape[1];
          break;
        }
      o.activations = open_activations(a.activations, hint).to_f32();
      if (o.activations.rank() != 2) {
        const int64_t f = o.activations.shape().empty() ? 1 : o.activations.shape().back();
        o.activations = o.activations.reshaped({o.activations.numel() / f, f});
      }
      const int64_t features = o.activations.shape()[1];
      bool fits = false;
      for (const io::TensorInfo& t : model->tensors())
        fits |= t.shape.size() == 2 && t.shape[1] == features && map_considers(t, o);
      if (!fits)
        throw Error("--activations '" + a.activations + "' have " + std::to_string(features) +
                    " features, but no tensor of '" + a.model + "' is a weight [out, " +
                    std::to_string(features) + "]");
      if (a.act_dtype == "keep")
        o.act_keep = true;
      else if (!a.act_dtype.empty())
        o.act_dtype = DataType::parse(a.act_dtype);
    } else if (!a.act_dtype.empty()) {
      throw Error("map: --act-dtype needs --activations");
    } else if (metric == MapMetric::OutputSNR) {
      throw Error("map: --metric outsnr needs --activations");
    }
    JobControl job;
    const bool tty = ::isatty(2) != 0;
    job.on_progress = [tty](double f) {
      static int last = -1;
      const int pct = static_cast<int>(f * 100);
      if (pct == last) return;
      last = pct;
      if (tty) std::fprintf(stderr, "\r\033[Kmap: %3d%%", pct);
    };
    g_job = &job;
    auto prev = std::signal(SIGINT, map_on_sigint);
    ModelMap m;
    try {
      m = sweep_model(*model, o, &job);
    } catch (...) {
      std::signal(SIGINT, prev);
      g_job = nullptr;
      if (tty) std::fprintf(stderr, "\n");
      throw;
    }
    std::signal(SIGINT, prev);
    g_job = nullptr;
    if (tty) std::fprintf(stderr, "\n");
    for (const auto& [name, why] : m.skipped)
      std::fprintf(stderr, "note: skipping '%s': %s\n", name.c_str(), why.c_str());
    const bool act = static_cast<bool>(o.activations);
    if (a.csv) {
      std::printf("tensor,layer,block,shape,numel");
      for (const std::string& c : m.columns) {
        std::printf(",%s", csv_quote(c + ":" + to_string(metric)).c_str());
        if (act)
          std::printf(",%s,%s", csv_quote(c + ":out_snr_db").c_str(),
                      csv_quote(c + ":out_product").c_str());
        if (calib) std::printf(",%s", csv_quote(c + ":calib_relerr").c_str());
      }
      // Each column's exact storage on the row's tensor (storage_bits), after the metrics.
      for (const std::string& c : m.columns)
        std::printf(",%s", csv_quote(c + ":bits_per_value").c_str());
      std::printf("\n");
      for (const MapRow& r : m.rows) {
        std::printf("%s,%s,%s,%s,%lld", csv_quote(r.name).c_str(), csv_quote(r.group).c_str(),
                    csv_quote(r.block).c_str(), csv_quote(shape_str(r.shape)).c_str(),
                    static_cast<long long>(r.numel));
        for (const MapCell& c : r.cells) {
          if (const double v = cell_value(c, metric); !std::isnan(v))
            std::printf(",%.6g", v);
          else
            std::printf(",");
          if (act) {
            if (c.has_output)
              std::printf(",%.6g,%s", c.out_snr_db, csv_quote(c.out_product).c_str());
            else
              std::printf(",,");
          }
          if (calib) c.has_calib ? std::printf(",%.6g", c.calib_rel_err) : std::printf(",");
        }
        for (const MapCell& c : r.cells)
          if (c.storage_bits)
            std::printf(",%.6g", c.bits_per_value(r.numel));
          else
            std::printf(",");
        std::printf("\n");
      }
      return;
    }
    ordered_json j;
    j["model"] = a.model;
    j["metric"] = to_string(metric);
    j["rotate"] = o.cast.rotate.str();
    j["backend"] = m.backend;
    j["columns"] = ordered_json::array();
    for (size_t d = 0; d < m.columns.size(); ++d)
      j["columns"].push_back({{"datatype", m.columns[d].substr(0, m.columns[d].find('@'))},
                              {"method", to_string(m.methods[d])},
                              {"label", m.dtypes[d].label()},
                              {"bits_per_value", num(m.bits[d])},
                              {"nominal_bits_per_value", num(m.nominal_bits[d])}});
    j["rows"] = ordered_json::array();
    for (const MapRow& r : m.rows) {
      ordered_json cells = ordered_json::array();
      for (const MapCell& c : r.cells) {
        ordered_json jc;
        if (c.storage_bits) {
          jc["storage_bits"] = c.storage_bits;
          jc["bits_per_value"] = num(c.bits_per_value(r.numel));
        }
        if (!c.error.empty()) {
          jc["error"] = c.error;
        } else {
          if (metric == MapMetric::SNR || metric == MapMetric::OutputSNR)
            metrics_json::put_snr(jc, "value", cell_value(c, metric));
          else
            jc["value"] = num(cell_value(c, metric));
          metrics_json::put_snr(jc, "snr_db", c.stats.snr_db);
          jc["relerr"] = num(metric_value(c.stats, MapMetric::RelErr));
          jc["max_abs_err"] = num(c.stats.max_abs_err);
          jc["clipped_pct"] = num(c.stats.clipped_pct());
        }
        if (c.has_output) {
          metrics_json::put_snr(jc, "out_snr_db", c.out_snr_db);
          jc["out_relerr"] = num(c.out_rel_err);
          jc["out_product"] = c.out_product;
        }
        if (c.has_calib) jc["calib_out_relerr"] = num(c.calib_rel_err);
        cells.push_back(jc);
      }
      j["rows"].push_back({{"name", r.name},
                           {"layer", r.group},
                           {"block", r.block},
                           {"dtype", r.stored_dtype},
                           {"shape", r.shape},
                           {"numel", r.numel},
                           {"axis", r.axis},
                           {"layout", r.layout.layout},
                           {"layout_guessed", r.layout.guessed},
                           {"cells", cells}});
    }
    j["skipped"] = ordered_json::array();
    for (const auto& [name, why] : m.skipped)
      j["skipped"].push_back({{"name", name}, {"reason", why}});
    j["values"] = m.values;
    j["seconds"] = m.seconds;
    std::printf("%s\n", j.dump(2).c_str());
  });
}

Register reg_map(map_cmd);

}  // namespace
}  // namespace castscope::cli
