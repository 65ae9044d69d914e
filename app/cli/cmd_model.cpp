// castscope-cli inspect MODEL | report MODEL --dtype D... | decompress PACKED OUT
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "castscope/cast.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/metrics.hpp"
#include "castscope/metrics_json.hpp"
#include "castscope/storage_bits.hpp"
#include "cli/command.hpp"
#include "cli/tensor_bits.hpp"

namespace castscope::cli {
namespace {

using nlohmann::ordered_json;

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

ordered_json num(double v) {
  return metrics_json::number<ordered_json>(v);
}

// Progress to stderr: one rewritten line on a terminal, one line per step otherwise.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(::isatty(2) != 0) {}
  void step(size_t i, const std::string& name) {
    if (tty_)
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", i + 1, total_, name.c_str());
    else
      std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, total_, name.c_str());
  }
  void done() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  size_t total_;
  bool tty_;
};

// ---------------------------------------------------------------------------------------------

struct InspectArgs {
  std::string model;
  std::string axis = "auto";
  bool json = false;
  std::vector<std::string> axis_for;
  std::vector<std::string> dtypes;  // --dtype: each one's exact bits per value per tensor
  std::string dump;
  bool reproduce = false;
};

// "stored as DATATYPE (convention), B bits/weight" for a weight a quantized checkpoint stores as
// codes and companions; "" for the others.
std::string stored_column(const io::TensorInfo& t) {
  if (t.stored.empty()) return "";
  char bits[32];
  std::snprintf(bits, sizeof bits, "%.4g", t.stored.bits_per_weight);
  const std::string& d = t.stored.datatype.empty() ? t.stored.format : t.stored.datatype;
  return "stored as " + d + " (" + t.stored.convention + "), " + bits + " bits/weight";
}

ordered_json stored_json(const io::TensorInfo& t) {
  if (t.stored.empty()) return nullptr;
  return {
      {"convention", t.stored.convention},
      {"datatype", t.stored.datatype.empty() ? ordered_json() : ordered_json(t.stored.datatype)},
      {"format", t.stored.format},
      {"parts", t.stored.parts},
      {"stored_bytes", t.stored.stored_bytes},
      {"bits_per_weight", t.stored.bits_per_weight}};
}

// The quantization axis a cast of this tensor would use ("-" for tensors that are never cast):
// its resolved layout's unless `o` names one.
std::string axis_column(const io::TensorInfo& t, const CastOptions& o) {
  if (!io::is_float_storage(t.dtype) || t.shape.empty() || numel(t.shape) == 0) return "-";
  try {
    return describe_axis(io::cast_options_for(o, t), t.shape);
  } catch (const Error&) {
    return "out of range";
  }
}

std::string layout_column(const io::TensorInfo& t) {
  if (t.layout.empty()) return "-";
  std::string s = t.layout.layout;
  if (t.layout.guessed) s += " (layout guessed)";
  if (t.layout.conflict) s += " (consumers disagree)";
  return s;
}

void inspect_cmd(CLI::App& app) {
  static InspectArgs a;
  auto* sub = app.add_subcommand(
      "inspect", "List a model's tensors (name, stored dtype, shape, size) from its headers");
  sub->add_option(
         "model", a.model,
         "Model: .safetensors, .npy, .npz, .gguf, .onnx, a directory or a *.safetensors.index.json")
      ->required();
  sub->add_flag("--json", a.json, "Print JSON instead of a table");
  add_axis_option(sub, a.axis);
  add_axis_for_option(sub, a.axis_for);
  sub->add_option("--dtype,-d", a.dtypes,
                  "Also this datatype's exact bits per value on each tensor, along its axis "
                  "(repeat for several)");
  sub->add_option("--dump", a.dump,
                  "Write each quantized weight's dequantized float32 values as DIR/NAME.npy");
  sub->add_flag(
      "--reproduce", a.reproduce,
      "Re-quantize each stored-quantized weight to its stored datatype (round to nearest) "
      "and report the fraction of identical values");
  sub->callback([] {
    const CastOptions o = parse_cast_options({.axis = a.axis});
    std::vector<DataType> dts;
    for (const std::string& s : a.dtypes) dts.push_back(DataType::parse(s));
    // One cell per --dtype: the datatype's storage on a floating-point tensor, "-" otherwise.
    auto bits_of = [&](const io::TensorInfo& t, size_t d) {
      return io::is_float_storage(t.dtype) && numel(t.shape) > 0 ? tensor_bits(dts[d], t, o)
                                                                 : TensorBits{0, 0, "", "not cast"};
    };
    auto m = with_layout_overrides(io::open_model(a.model), axis_override_plan(a.axis_for));
    // "Does CastScope reproduce this file?", per weight whose stored datatype CastScope has.
    std::map<std::string, io::Reproduction> rep;
    if (a.reproduce)
      for (const io::TensorInfo& t : m->tensors())
        if (!t.stored.empty() && !t.stored.datatype.empty())
          rep[t.name] = io::reproduce_stored(*m, t.name);
    if (!a.dump.empty()) {
      std::filesystem::create_directories(a.dump);
      for (const io::TensorInfo& t : m->tensors())
        if (!t.stored.empty())
          io::save_npy((std::filesystem::path(a.dump) / (t.name + ".npy")).string(),
                       m->load(t.name));
    }
    uint64_t bytes = 0;
    int64_t elems = 0;
    for (const io::TensorInfo& t : m->tensors()) {
      bytes += t.nbytes;
      elems += numel(t.shape);
    }
    if (a.json) {
      ordered_json j;
      j["model"] = a.model;
      j["format"] = m->format();
      j["tensors"] = ordered_json::array();
      for (const io::TensorInfo& t : m->tensors())
        j["tensors"].push_back({{"name", t.name},
                                {"dtype", t.dtype},
                                {"shape", t.shape},
                                {"numel", numel(t.shape)},
                                {"nbytes", t.nbytes},
                                {"file", t.file},
                                {"axis", axis_column(t, o)},
                                {"layout",
                                 {{"name", t.layout.layout},
                                  {"axis", t.layout.axis.str()},
                                  {"view", layout_view(t.shape, t.layout.axis)},
                                  {"reason", t.layout.reason},
                                  {"guessed", t.layout.guessed},
                                  {"conflict", t.layout.conflict},
                                  {"embedding", t.layout.embedding}}},
                                {"stored", stored_json(t)}});
      for (size_t i = 0; i < m->tensors().size() && !dts.empty(); ++i) {
        ordered_json& jb = j["tensors"][i]["bits"] = ordered_json::array();
        for (size_t d = 0; d < dts.size(); ++d) {
          ordered_json e = tensor_bits_json<ordered_json>(bits_of(m->tensors()[i], d));
          e["datatype"] = a.dtypes[d];
          jb.push_back(e);
        }
      }
      if (a.reproduce) {
        for (ordered_json& e : j["tensors"]) {
          auto it = rep.find(e["name"].get<std::string>());
          if (it != rep.end())
            e["reproduce"] = {{"datatype", it->second.datatype},
                              {"values", it->second.values},
                              {"identical", it->second.identical},
                              {"fraction", it->second.fraction()}};
        }
      }
      j["total"] = {{"tensors", m->tensors().size()}, {"numel", elems}, {"nbytes", bytes}};
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    size_t w = 4;
    for (const io::TensorInfo& t : m->tensors()) w = std::max(w, t.name.size());
    size_t lw = 6;
    for (const io::TensorInfo& t : m->tensors()) lw = std::max(lw, layout_column(t).size());
    std::printf("%-*s  %-14s  %-24s  %12s  %-14s  %-*s  %s", static_cast<int>(w), "name", "dtype",
                "shape", "size", "axis", static_cast<int>(lw), "layout", "reason");
    for (const std::string& d : a.dtypes) std::printf("  | bits/value %s", d.c_str());
    std::printf("\n");
    for (const io::TensorInfo& t : m->tensors()) {
      std::printf("%-*s  %-14s  %-24s  %12s  %-14s  %-*s  %s", static_cast<int>(w), t.name.c_str(),
                  t.dtype.c_str(), shape_str(t.shape).c_str(), human_bytes(t.nbytes).c_str(),
                  axis_column(t, o).c_str(), static_cast<int>(lw), layout_column(t).c_str(),
                  t.layout.reason.c_str());
      for (size_t d = 0; d < dts.size(); ++d)
        std::printf("  | %s", tensor_bits_text(bits_of(t, d)).c_str());
      std::printf("\n");
    }
    for (const io::TensorInfo& t : m->tensors())
      if (!t.stored.empty()) {
        std::string line = t.name + ": " + stored_column(t);
        auto it = rep.find(t.name);
        if (it != rep.end()) {
          char f[64];
          std::snprintf(f, sizeof f, "; reproduced %.4f%% of values", 100 * it->second.fraction());
          line += f;
        }
        std::printf("%s\n", line.c_str());
      }
    std::printf("%zu tensors, %lld values, %s (%s)\n", m->tensors().size(),
                static_cast<long long>(elems), human_bytes(bytes).c_str(), m->format().c_str());
  });
}

Register reg_inspect(inspect_cmd);

// ---------------------------------------------------------------------------------------------

struct ReportArgs {
  std::string model, round = "even", scale_mode = "floor", filter, device = "auto";
  std::string rotate = "none";
  std::vector<std::string> dtypes;
  bool json = false, csv = false;
  std::string axis = "auto";
  std::vector<std::string> axis_for;
};

struct Total {
  int64_t count = 0, clipped = 0, nonfinite_in = 0, nonfinite_out = 0, tensors = 0, failed = 0;
  double sq_err = 0, signal = 0, max_err = 0;
  uint64_t bits = 0;  // storage_bits of the cast tensors
  double bits_per_value() const {
    return count ? static_cast<double>(bits) / static_cast<double>(count) : 0.0;
  }
};

void report_cmd(CLI::App& app) {
  static ReportArgs a;
  auto* sub = app.add_subcommand("report",
                                 "Per tensor and per datatype error of casting a model: MSE, SNR, "
                                 "max error, clipped %, non-finite");
  sub->add_option("model", a.model, "Model: file, directory or *.safetensors.index.json")
      ->required();
  sub->add_option("--dtype,-d", a.dtypes, "Datatype (repeat for several)")->required();
  sub->add_flag("--json", a.json, "Print JSON");
  sub->add_flag("--csv", a.csv, "Print CSV");
  add_rounding_options(sub, a.round, a.scale_mode);
  add_axis_option(sub, a.axis);
  add_axis_for_option(sub, a.axis_for);
  sub->add_option("--filter", a.filter,
                  "Only tensors whose name matches this regular expression (anywhere in the name)");
  add_device_option(sub, a.device);
  sub->add_option("--rotate", a.rotate,
                  "Block Hadamard rotation before casting: N, hN or hNrSEED (random signs), "
                  "N in 16..256");
  sub->callback([] {
    if (a.json && a.csv) throw Error("choose one of --json and --csv");
    std::vector<DataType> dts;
    for (const std::string& s : a.dtypes) dts.push_back(DataType::parse(s));
    CastOptions o = parse_cast_options({.round = a.round,
                                        .scale_mode = a.scale_mode,
                                        .axis = a.axis,
                                        .rotate = a.rotate,
                                        .device = a.device});
    o.mode = CastMode::Virtual;
    std::optional<std::regex> re;
    if (!a.filter.empty()) {
      try {
        re.emplace(a.filter, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        throw Error("--filter '" + a.filter + "' is not a valid regular expression (" + e.what() +
                    ")");
      }
    }
    auto m = with_layout_overrides(io::open_model(a.model), axis_override_plan(a.axis_for));
    std::vector<const io::TensorInfo*> todo;
    for (const io::TensorInfo& t : m->tensors())
      if (!re || std::regex_search(t.name, *re)) todo.push_back(&t);
    std::vector<Total> totals(dts.size());
    ordered_json jt = ordered_json::array(), jskip = ordered_json::array();
    if (a.csv)
      std::printf(
          "tensor,stored_dtype,shape,numel,datatype,mse,snr_db,max_abs_err,clipped_pct,nonfinite_"
          "in,nonfinite_out,error,axis,bits_per_value\n");
    else if (!a.json)
      std::printf("%-40s %-22s %12s %9s %12s %9s %8s %9s  %s\n", "tensor", "datatype", "mse",
                  "snr_db", "max_abs_err", "clipped%", "nonfin", "bits/val", "axis");
    Progress prog(todo.size());
    for (size_t i = 0; i < todo.size(); ++i) {
      const io::TensorInfo& info = *todo[i];
      prog.step(i, info.name);
      if (!io::is_float_storage(info.dtype) || numel(info.shape) == 0) {
        const std::string why =
            numel(info.shape) == 0 ? "empty" : "not floating point (" + info.dtype + ")";
        prog.done();
        std::fprintf(stderr, "note: skipping '%s': %s\n", info.name.c_str(), why.c_str());
        jskip.push_back({{"name", info.name}, {"dtype", info.dtype}, {"reason", why}});
        continue;
      }
      Tensor x;
      try {
        x = m->load(info.name);  // one tensor in memory at a time
      } catch (const Error& e) {
        prog.done();
        std::fprintf(stderr, "note: skipping '%s': %s\n", info.name.c_str(), e.what());
        jskip.push_back({{"name", info.name}, {"dtype", info.dtype}, {"reason", e.what()}});
        continue;
      }
      // The tensor's mapped pages are not needed after this iteration: drop them so resident
      // memory stays bounded by one tensor on checkpoints larger than RAM.
      struct Release {
        const io::Model& model;
        const std::string& name;
        ~Release() { io::release_pages(model, name); }
      } release{*m, info.name};
      ordered_json jr = ordered_json::array();
      const std::string axis = axis_column(info, o);
      for (size_t d = 0; d < dts.size(); ++d) {
        const std::string label = a.dtypes[d];
        Stats s;
        std::string err;
        uint64_t bits = 0;  // the cast's exact storage on this tensor (storage_bits)
        try {
          const CastOptions to = io::cast_options_for(o, info);
          bits = storage_bits(dts[d], info.shape, to);
          CastResult r = cast(x, dts[d], to);
          s = compute_stats(x, r.values, r.counts.clipped);
        } catch (const Cancelled&) {
          throw;
        } catch (const Error& e) {
          err = e.what();
        }
        Total& t = totals[d];
        if (err.empty()) {
          t.count += s.count;
          t.clipped += s.clipped;
          t.nonfinite_in += s.nonfinite_in;
          t.nonfinite_out += s.nonfinite_out;
          t.sq_err += s.mse * static_cast<double>(s.count);
          t.signal += s.signal_power * static_cast<double>(s.count);
          t.max_err = std::max(t.max_err, s.max_abs_err);
          t.bits += bits;
          ++t.tensors;
        } else {
          ++t.failed;
        }
        if (a.json) {
          if (err.empty()) {
            ordered_json r = {{"datatype", label}};
            metrics_json::put_stats(r, s);
            r["storage_bits"] = bits;
            r["bits_per_value"] = num(static_cast<double>(bits) / numel(info.shape));
            jr.push_back(r);
          } else
            jr.push_back({{"datatype", label}, {"error", err}});
        } else if (a.csv) {
          std::string e2 = err;
          for (char& c : e2)
            if (c == '"') c = '\'';
          std::printf("\"%s\",%s,\"%s\",%lld,%s,%.9g,%.6g,%.9g,%.6g,%lld,%lld,\"%s\",%s,",
                      info.name.c_str(), info.dtype.c_str(), shape_str(info.shape).c_str(),
                      static_cast<long long>(numel(info.shape)), label.c_str(), s.mse, s.snr_db,
                      s.max_abs_err, s.clipped_pct(), static_cast<long long>(s.nonfinite_in),
                      static_cast<long long>(s.nonfinite_out), e2.c_str(), axis.c_str());
          if (err.empty()) std::printf("%.6g", static_cast<double>(bits) / numel(info.shape));
          std::printf("\n");
        } else {
          prog.done();
          if (err.empty())
            std::printf("%-40s %-22s %12.6g %9.3f %12.6g %9.4f %8lld %9.4g  %s\n",
                        info.name.c_str(), label.c_str(), s.mse, s.snr_db, s.max_abs_err,
                        s.clipped_pct(), static_cast<long long>(s.nonfinite_in + s.nonfinite_out),
                        static_cast<double>(bits) / numel(info.shape), axis.c_str());
          else
            std::printf("%-40s %-22s error: %s\n", info.name.c_str(), label.c_str(), err.c_str());
        }
      }
      if (a.json)
        jt.push_back({{"name", info.name},
                      {"dtype", info.dtype},
                      {"shape", info.shape},
                      {"axis", axis},
                      {"layout", info.layout.layout},
                      {"layout_guessed", info.layout.guessed},
                      {"results", jr}});
      std::fflush(stdout);
    }
    prog.done();
    auto snr = [](const Total& t) {
      return t.sq_err == 0 ? INFINITY : 10.0 * std::log10(t.signal / t.sq_err);
    };
    auto mse = [](const Total& t) {
      return t.count ? t.sq_err / static_cast<double>(t.count) : 0.0;
    };
    auto pct = [](const Total& t) {
      return t.count ? 100.0 * static_cast<double>(t.clipped) / static_cast<double>(t.count) : 0.0;
    };
    if (a.json) {
      ordered_json j;
      j["model"] = a.model;
      j["format"] = m->format();
      j["options"] = {{"round", to_string(o.round)},
                      {"scale_mode", to_string(o.scale_mode)},
                      {"axis", AxisSpec::from(o).str()}};
      if (o.rotate.enabled()) j["options"]["rotate"] = o.rotate.str();
      j["tensors"] = jt;
      j["skipped"] = jskip;
      j["totals"] = ordered_json::array();
      for (size_t d = 0; d < dts.size(); ++d) {
        const Total& t = totals[d];
        ordered_json jt = {{"datatype", a.dtypes[d]}, {"label", dts[d].label()},
                           {"tensors", t.tensors},    {"failed", t.failed},
                           {"numel", t.count},        {"mse", num(mse(t))}};
        metrics_json::put_snr(jt, "snr_db", snr(t));
        jt["max_abs_err"] = num(t.max_err);
        jt["clipped_pct"] = num(pct(t));
        jt["nonfinite_in"] = t.nonfinite_in;
        jt["nonfinite_out"] = t.nonfinite_out;
        jt["storage_bits"] = t.bits;
        jt["bits_per_value"] = num(t.bits_per_value());
        j["totals"].push_back(jt);
      }
      std::printf("%s\n", j.dump(2).c_str());
    } else if (a.csv) {
      for (size_t d = 0; d < dts.size(); ++d) {
        const Total& t = totals[d];
        std::printf("__total__,,,%lld,%s,%.9g,%.6g,%.9g,%.6g,%lld,%lld,\"\",,%.6g\n",
                    static_cast<long long>(t.count), a.dtypes[d].c_str(), mse(t), snr(t), t.max_err,
                    pct(t), static_cast<long long>(t.nonfinite_in),
                    static_cast<long long>(t.nonfinite_out), t.bits_per_value());
      }
    } else {
      std::printf("\ntotals over %zu tensors (%zu skipped):\n", todo.size() - jskip.size(),
                  jskip.size());
      for (size_t d = 0; d < dts.size(); ++d) {
        const Total& t = totals[d];
        std::printf("%-40s %-22s %12.6g %9.3f %12.6g %9.4f %8lld %9.4g%s\n", "TOTAL",
                    a.dtypes[d].c_str(), mse(t), snr(t), t.max_err, pct(t),
                    static_cast<long long>(t.nonfinite_in + t.nonfinite_out), t.bits_per_value(),
                    t.failed ? (" (" + std::to_string(t.failed) + " failed)").c_str() : "");
      }
    }
  });
}

Register reg_report(report_cmd);

// ---------------------------------------------------------------------------------------------

struct DecompressArgs {
  std::string in, out, tensor;
};

void decompress_cmd(CLI::App& app) {
  static DecompressArgs a;
  auto* sub = app.add_subcommand("decompress",
                                 "Upcast a CastScope packed .safetensors file to float32 .npy");
  sub->add_option(
         "packed", a.in,
         "CastScope packed .safetensors (from cast --mode compress or export --layout native)")
      ->required();
  sub->add_option("output", a.out, "Output .npy (one tensor) or a directory (one .npy per tensor)")
      ->required();
  sub->add_option("--tensor,-t", a.tensor, "Only this tensor");
  sub->callback([] {
    std::vector<io::PackedTensor> all = io::load_packed(a.in);
    std::vector<const io::PackedTensor*> sel;
    for (const io::PackedTensor& p : all)
      if (a.tensor.empty() || p.name == a.tensor) sel.push_back(&p);
    if (sel.empty())
      throw Error(a.tensor.empty() ? "'" + a.in + "' holds no packed tensors"
                                   : "'" + a.in + "' has no packed tensor '" + a.tensor + "'");
    const bool to_file = a.out.size() > 4 && a.out.compare(a.out.size() - 4, 4, ".npy") == 0;
    if (to_file) {
      if (sel.size() != 1)
        throw Error("'" + a.in + "' holds " + std::to_string(sel.size()) +
                    " tensors; pass --tensor NAME or an output directory");
      io::save_npy(a.out, upcast(sel[0]->result));
      std::fprintf(stderr, "wrote '%s' (%s %s)\n", a.out.c_str(), sel[0]->name.c_str(),
                   shape_str(sel[0]->result.shape).c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    if (ec) throw Error("cannot create directory '" + a.out + "': " + ec.message());
    Progress prog(sel.size());
    for (size_t i = 0; i < sel.size(); ++i) {
      prog.step(i, sel[i]->name);
      std::string file = sel[i]->name;
      for (char& c : file)
        if (c == '/' || c == '\\') c = '_';
      if (file.empty() || file == "." || file == "..") file = "_" + file;
      io::save_npy((std::filesystem::path(a.out) / (file + ".npy")).string(),
                   upcast(sel[i]->result));
    }
    prog.done();
    std::fprintf(stderr, "wrote %zu tensors to '%s'\n", sel.size(), a.out.c_str());
  });
}

Register reg_decompress(decompress_cmd);

}  // namespace
}  // namespace castscope::cli
