// Background jobs that run the castscope Python package (the model's own runtimes are Python
// libraries): the plan panel's Evaluate and the budget planner's runtime activations.
#pragma once

#include <string>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope::gui {

// python3, or the interpreter $CASTSCOPE_PYTHON names.
std::string python_interpreter();

// Runs args (a `python3 -m castscope.MODULE ... --progress` child) and returns its stdout. Its
// stderr lines "progress F STAGE" drive ctl.progress, the rest of stderr is the error message; a
// cancel sends SIGINT, on which the child stops and exits 130 (Cancelled). `what` names the work
// in messages ("evaluation").
std::string run_python_job(JobControl& ctl, std::vector<std::string> args, const std::string& what);

}  // namespace castscope::gui
