// castscope-cli eval MODEL --plan plan.json [--inputs FILE] [--act-dtype D] [--json|--csv]:
// end-to-end evaluation of a plan in the model's own runtime (onnxruntime, PyTorch +
// transformers, llama.cpp). Those runtimes are Python libraries, so the command runs the castscope
// Python package (python3 -m castscope.eval) with the same arguments; $CASTSCOPE_PYTHON names
// another interpreter.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/python_child.hpp"

namespace castscope::cli {
namespace {

struct EvalArgs {
  std::string model, plan, inputs, act_dtype, device = "auto", round = "even", scale_mode = "floor",
                                              axis = "auto", save, calib;
  int64_t seed = 0;
  int max_tokens = 512;
  bool json = false, csv = false, progress = false;
};

void eval_cmd(CLI::App& app) {
  static EvalArgs a;
  auto* sub = app.add_subcommand(
      "eval",
      "Run the original and the plan-quantized model in its own runtime (onnxruntime, PyTorch + "
      "transformers, llama.cpp) and compare outputs: SNR, KL divergence, top-1, perplexity");
  sub->add_option("model", a.model, "ONNX file, Hugging Face model directory or GGUF file")
      ->required();
  sub->add_option("--plan", a.plan, "Plan JSON (castscope-cli plan / export --plan) or a datatype")
      ->required();
  sub->add_option("--inputs", a.inputs,
                  "ONNX: .npy / .npz; language models: token ids (.npy) or a text file read with "
                  "the model's tokenizer (default: synthesized from the input spec, seeded)");
  sub->add_option("--act-dtype", a.act_dtype,
                  "Also cast the inputs of Linear / Conv1D layers to this datatype (PyTorch)");
  add_device_option(sub, a.device);
  sub->add_option("--seed", a.seed, "Seed of synthetic inputs and stochastic rounding");
  add_rounding_options(sub, a.round, a.scale_mode);
  add_axis_option(sub, a.axis);
  sub->add_option("--max-tokens", a.max_tokens, "Tokens per sequence at most (default 512)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--save-quantized", a.save,
                  "Also write the quantized model as the runtime ran it");
  sub->add_option("--calib", a.calib,
                  "Calibration inputs [tokens, in] keyed by weight name (.safetensors / .npz) for "
                  "the plan's gptq / awq rules")
      ->check(CLI::ExistingFile);
  auto* json = sub->add_flag("--json", a.json, "Print the result as JSON");
  sub->add_flag("--csv", a.csv, "Print one CSV row per output")->excludes(json);
  sub->add_flag("--progress", a.progress, "Print 'progress FRACTION STAGE' lines on stderr");
  sub->callback([] {
    const std::string py = python_exe();
    require_python_module(py, "castscope.eval",
                          "eval runs the package (python3 -m castscope.eval)");
    std::vector<std::string> args = {py, "-m", "castscope.eval", a.model, "--plan", a.plan};
    auto opt = [&](const char* flag, const std::string& v) {
      if (!v.empty()) args.insert(args.end(), {flag, v});
    };
    opt("--inputs", a.inputs);
    opt("--act-dtype", a.act_dtype);
    opt("--device", a.device);
    opt("--seed", std::to_string(a.seed));
    opt("--round", a.round);
    opt("--scale-mode", a.scale_mode);
    opt("--axis", a.axis);
    opt("--max-tokens", std::to_string(a.max_tokens));
    opt("--save-quantized", a.save);
    opt("--calib", a.calib);
    if (a.json) args.push_back("--json");
    if (a.csv) args.push_back("--csv");
    if (a.progress) args.push_back("--progress");
    run_child_or_exit(args, py);
  });
}

Register reg(eval_cmd);

}  // namespace
}  // namespace castscope::cli
