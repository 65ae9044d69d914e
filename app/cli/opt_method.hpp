// The quantization-method options of `cast` and `map`: --method and its settings, the same
// names and checks in both.
#pragma once

#include "castscope/method.hpp"
#include "cli/command.hpp"

namespace castscope::cli {

struct MethodArgs {
  std::vector<std::string> methods;  // map: several; cast: at most one
  std::string calib;
  MethodOptions opt;
};

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
  sub->add_option("--damp", a.opt.damp,
                  "gptq: damping, a fraction of the Hessian's mean diagonal (default 0.01)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--gptq-block", a.opt.block, "gptq: columns per update block (default 128)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--act-order", a.opt.act_order,
                "gptq: columns in order of descending Hessian diagonal (needs --static-groups "
                "for group scales)");
  sub->add_flag("--static-groups", a.opt.static_groups,
                "gptq: group scales chosen once from the original weight (llm-compressor) instead "
                "of from the updated weight as each group starts");
  sub->add_flag("--four-over-six", a.opt.four_over_six,
                "mse: each NVFP4 block maps its absmax onto 6 or 4, whichever errs less");
}

}  // namespace castscope::cli
