// castscope-cli export MODEL OUT (--plan plan.json | --dtype D) [--layout native|gpt-oss|
// compressed-tensors|gguf]: streams a checkpoint tensor by tensor into a packed file.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "castscope/export.hpp"
#include "castscope/imatrix.hpp"
#include "castscope/io.hpp"
#include "cli/command.hpp"
#include "cli/opt_method.hpp"

namespace castscope::cli {
namespace {

struct ExportArgs {
  std::string model, out, plan, dtype, layout = "native", round = "even", scale_mode = "floor",
                                       overflow = "saturate", device = "auto", config;
  uint64_t seed = 0;
  std::string axis = "auto";
  bool quiet = false;
  std::string rotate, calib;
  std::vector<std::string> axis_for;  // PATTERN=AXIS: per-tensor axis (layout) overrides
  std::string imatrix;                // llama-imatrix's file (GGUF or legacy .dat)
  std::string gguf_file_type;         // llama.cpp's name of the mix, for general.file_type
};

JobControl* g_job = nullptr;

extern "C" void on_sigint(int) {
  // Only an atomic store: the export notices it at its next check and cleans up.
  if (g_job) g_job->cancel.store(true);
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void export_cmd(CLI::App& app) {
  static ExportArgs a;
  auto* sub = app.add_subcommand(
      "export", "Export a checkpoint with per-layer datatypes (see docs/export-formats.md)");
  sub->add_option("model", a.model, "Model: a file, a directory or a *.safetensors.index.json")
      ->required();
  sub->add_option("output", a.out,
                  "Output file (an existing directory: model.safetensors / model.gguf inside "
                  "it). From a model directory or *.index.json, a new path (not *.safetensors) "
                  "becomes a model directory: other files copied, config.json merged, shards and "
                  "index kept")
      ->required();
  auto* plan = sub->add_option("--plan", a.plan, "Plan JSON: tensor-name patterns to datatypes");
  auto* dtype =
      sub->add_option("--dtype,-d", a.dtype,
                      "Shortcut plan: every float weight of rank 2 or more to this datatype, "
                      "along its resolved layout (1-D tensors and embeddings kept)");
  plan->excludes(dtype);
  dtype->excludes(plan);
  sub->add_option("--layout", a.layout, "native | gpt-oss | compressed-tensors | gguf")
      ->check(CLI::IsMember({"native", "gpt-oss", "compressed-tensors", "gguf"}));
  add_rounding_options(sub, a.round, a.scale_mode);
  sub->add_option("--overflow", a.overflow,
                  "saturate | ieee: values beyond a datatype's range clamp to its largest "
                  "finite value, or become Inf / NaN where it has them (as cast)")
      ->check(CLI::IsMember({"saturate", "ieee"}));
  sub->add_option("--seed", a.seed, "Seed of stochastic rounding");
  sub->add_option("--imatrix", a.imatrix,
                  "llama-imatrix's importance matrix (.gguf or legacy .dat): ggml's quantizers "
                  "weigh each tensor's columns by its entry, as llama-quantize --imatrix does")
      ->check(CLI::ExistingFile);
  sub->add_option("--gguf-file-type", a.gguf_file_type,
                  "gguf: general.file_type by llama.cpp's name of the mix (Q4_K_S, Q4_K_M, ...; "
                  "default: the dominant type's)");
  add_axis_option(sub, a.axis);
  add_axis_for_option(sub, a.axis_for);
  add_device_option(sub, a.device);
  sub->add_option("--config", a.config,
                  "compressed-tensors: config.json to create or update (default: beside OUT)");
  sub->add_flag("--quiet,-q", a.quiet, "No progress on stderr");
  sub->add_option("--calib", a.calib,
                  "Calibration inputs for the plan's gptq / awq rules: a .safetensors or .npz of "
                  "activations [tokens, in] keyed by weight name")
      ->check(CLI::ExistingFile);
  sub->add_option("--rotate", a.rotate,
                  "With --dtype: block Hadamard rotation before casting (hN or hNrSEED); native "
                  "layout only. Plans set \"rotate\" per rule");
  sub->callback([] {
    if (a.plan.empty() && a.dtype.empty())
      throw Error("export needs --plan plan.json or --dtype D");
    ExportPlan p = a.plan.empty() ? plan_for_dtype(a.dtype) : load_plan(a.plan);
    if (!a.rotate.empty()) {
      if (!a.plan.empty())
        throw Error("--rotate goes with --dtype; a plan sets \"rotate\" in its rules");
      p.rules.front().rotate = parse_rotation(a.rotate);
    }
    const ExportPlan overrides = axis_override_plan(a.axis_for);
    if (!a.axis_for.empty()) p = with_axis_overrides(p, overrides);
    ExportOptions o;
    o.layout = parse_layout(a.layout);
    // mode, round, scale mode, overflow, axis, rotate (a plan's), device
    o.cast =
        parse_cast_options({"", a.round, a.scale_mode, a.overflow, a.axis, "", a.device}, o.cast);
    o.cast.seed = a.seed;
    o.config_path = a.config;
    if (!a.calib.empty()) o.calib = calib_by_name(a.calib);
    o.gguf_file_type = a.gguf_file_type;
    if (!a.imatrix.empty()) {
      o.imatrix = std::make_shared<const io::Imatrix>(io::read_imatrix(a.imatrix));
      o.imatrix_file = a.imatrix;
    }
    o.metadata["castscope.plan"] = plan_to_json(p);
    std::string out = a.out;
    if (is_dir(out)) out += o.layout == Layout::GGUF ? "/model.gguf" : "/model.safetensors";
    // Axis-only rules (--axis-for, or the plan's own) become the tensors' layouts, as inspect,
    // report and map show them.
    const std::unique_ptr<io::Model> model = with_layout_overrides(io::open_model(a.model), p);
    JobControl job;
    const auto t0 = std::chrono::steady_clock::now();
    // Called from the engine's worker threads: one of them prints each new percentage.
    std::atomic<int> last{-1};
    job.on_progress = [&](double f) {
      const int pct = static_cast<int>(f * 100);
      int seen = last.load();
      if (a.quiet || pct <= seen || !last.compare_exchange_strong(seen, pct)) return;
      std::fprintf(stderr, "\rexport: %3d%%", pct);
      std::fflush(stderr);
    };
    g_job = &job;
    auto prev = std::signal(SIGINT, on_sigint);
    auto prev_term = std::signal(SIGTERM, on_sigint);
    ExportReport rep;
    try {
      rep = export_model(*model, out, p, o, &job);
    } catch (...) {
      std::signal(SIGINT, prev);
      std::signal(SIGTERM, prev_term);
      g_job = nullptr;
      if (!a.quiet) std::fprintf(stderr, "\n");
      throw;
    }
    std::signal(SIGINT, prev);
    std::signal(SIGTERM, prev_term);
    g_job = nullptr;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a.quiet) std::fprintf(stderr, "\n");
    int cast_count = 0;
    for (const ExportedTensor& t : rep.tensors) cast_count += t.dtype.rfind("keep:", 0) != 0;
    std::printf("exported %zu tensors (%d cast, %zu kept) as %s in %.2f s: %.3f MB -> %.3f MB\n",
                rep.tensors.size(), cast_count, rep.tensors.size() - cast_count,
                to_string(o.layout), s, rep.bytes_in / 1e6, rep.bytes_out / 1e6);
    // The axis in use: tensors cast on anything but their plain last axis are named.
    int last_axis = 0;
    for (const ExportedTensor& t : rep.tensors) {
      if (t.axis.empty()) continue;
      if (t.axis.rfind("-1:", 0) == 0 ||
          t.axis.rfind(std::to_string(t.shape.size() - 1) + ":", 0) == 0)
        ++last_axis;
      else
        std::printf("  %s %s: axis %s\n", t.name.c_str(), t.dtype.c_str(), t.axis.c_str());
    }
    if (last_axis) std::printf("%d cast tensors along their last axis\n", last_axis);
    for (const std::string& f : rep.files) std::printf("wrote %s\n", f.c_str());
    if (!rep.directory.empty()) std::printf("model directory %s\n", rep.directory.c_str());
  });
}

Register reg(export_cmd);

}  // namespace
}  // namespace castscope::cli
