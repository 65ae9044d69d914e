// The "method" and "method_options" keys of a plan rule (docs/export-formats.md, "Plan files").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "castscope/method.hpp"

namespace castscope::io::detail {

// The rule's method, empty when it has no "method" key (rtn, as every plan written before methods
// reads). Error naming `where` for an unknown method, unknown or mistyped options, or options
// without a method.
std::optional<MethodOptions> plan_rule_method(const nlohmann::json& rule, const std::string& where);
// Writes "method" and, for a method other than rtn, "method_options" with that method's options.
void put_plan_rule_method(nlohmann::json& rule, const MethodOptions& m);

}  // namespace castscope::io::detail
