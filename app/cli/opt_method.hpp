// The quantization-method options of `cast` and `map`: --method and its settings, the same
// names and checks in both.
#pragma once

#include <functional>
#include <memory>

#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "cli/command.hpp"

namespace castscope::cli {

struct MethodArgs {
  std::vector<std::string> methods;  // map: several; cast: at most one
  std::string calib;
  MethodOptions opt;
};

// The methods' settings: --damp, --gptq-block, --act-order, --static-groups, --four-over-six.
inline void add_method_settings(CLI::App* sub, MethodOptions& opt) {
  sub->add_option("--damp", opt.damp,
                  "gptq: damping, a fraction of the Hessian's mean diagonal (default 0.01)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--gptq-block", opt.block, "gptq: columns per update block (default 128)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--act-order", opt.act_order,
                "gptq: columns in order of descending Hessian diagonal (needs --static-groups "
                "for group scales)");
  sub->add_flag("--static-groups", opt.static_groups,
                "gptq: group scales chosen once from the original weight (llm-compressor) instead "
                "of from the updated weight as each group starts");
  sub->add_flag("--four-over-six", opt.four_over_six,
                "mse: each NVFP4 block maps its absmax onto 6 or 4, whichever errs less");
}

inline void add_method_options(CLI::App* sub, MethodArgs& a, bool several) {
  auto* m = sub->add_option("--method", a.methods,
                            several ? "Quantization methods, one column each per datatype: rtn "
                                      "(default) | gptq | mse | awq (repeatable)"
                                    : "Quantization method: rtn (default) | gptq | mse | awq");
  m->check(CLI::IsMember({"rtn", "gptq", "mse", "awq"}));
  if (!several) m->expected(1);
  sub->add_option("--calib", a.calib,
                  several ? "Calibration inputs for gptq / awq: a .safetensors or .npz of "
                            "activations [tokens, in] keyed by weight name"
                          : "Calibration inputs for gptq / awq: .npy activations [tokens, in]")
      ->check(CLI::ExistingFile);
  add_method_settings(sub, a.opt);
}

// Calibration inputs keyed by weight name in a .safetensors / .npz file, read one at a time as
// their tensors come; an empty tensor for a weight the file does not hold.
inline std::function<Tensor(const std::string&)> calib_by_name(const std::string& path) {
  std::shared_ptr<io::Model> calib = io::open_model(path);
  return [calib](const std::string& name) {
    for (const io::TensorInfo& t : calib->tensors())
      if (t.name == name) return calib->load(name);
    return Tensor();
  };
}

}  // namespace castscope::cli
