// Subcommands register themselves here, so each lives in its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/error.hpp"

namespace castscope::cli {

using Registrar = std::function<void(CLI::App&)>;
std::vector<Registrar>& registrars();

struct Register {
  explicit Register(Registrar r) { registrars().push_back(std::move(r)); }
};

// Exit codes: 0 success, 1 bad input / failure (message on stderr), 2 usage error, 130 cancelled.
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// The cast options every casting subcommand takes, with the same names, choices and aliases.
inline void add_rounding_options(CLI::App* sub, std::string& round, std::string& scale_mode) {
  sub->add_option("--round", round, "even | away | zero | stochastic")
      ->check(CLI::IsMember({"even", "away", "nearest", "zero", "stochastic"}));
  sub->add_option("--scale-mode", scale_mode,
                  "floor | ceil | midmax | option3 | topbinade; torchao's names: floor, rceil "
                  "(= topbinade), ceil, even (= option3)")
      ->check(CLI::IsMember(
          {"floor", "max", "ceil", "midmax", "auto", "option3", "even", "topbinade", "rceil"}));
}
inline void add_device_option(CLI::App* sub, std::string& device) {
  sub->add_option("--device", device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "gpu"}));
}

// Per-tensor layout overrides, PATTERN=AXIS (repeatable): axis-only plan rules
// (axis_override_plan, with_layout_overrides).
inline void add_axis_for_option(CLI::App* sub, std::vector<std::string>& axis_for) {
  sub->add_option("--axis-for", axis_for,
                  "PATTERN=AXIS: the quantization axis (layout) of the tensors PATTERN matches "
                  "(a glob over the whole name or re:REGEX, as in plans) instead of the one the "
                  "file shows; repeat for several, e.g. --axis-for 'deconv*=:0'");
}

// The quantization axis: auto (per tensor, the reduction axis the stacks use: the last axis,
// axes 1.. flattened for a conv weight of rank 4 / 5), an axis, or an axis and every later one
// flattened ("1:"). Checked here so a bad value is a usage error.
inline void add_axis_option(CLI::App* sub, std::string& axis) {
  sub->add_option("--axis", axis,
                  "Quantization axis: auto (default: the last axis; a conv weight [O, I, kh, "
                  "kw] over I*kh*kw), A (negative counts from the end; 2-D tiles cover A-1 and "
                  "A) or A: (axes A to the end flattened, e.g. 1:)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              AxisSpec::parse(v);
              return {};
            } catch (const Error& e) {
              return e.what();
            }
          },
          "auto|A|A:", "axis"));
}

}  // namespace castscope::cli
