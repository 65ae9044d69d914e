#pragma once

#include "app_state.hpp"

namespace castscope::gui {

// Returns the process exit code.
int run_headless(const AppOptions& opt);

}  // namespace castscope::gui
