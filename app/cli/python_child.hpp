// The subcommands that need the model's own runtimes (eval, plan with runtime activations) run the
// castscope Python package as a child process: python3, or the interpreter $CASTSCOPE_PYTHON names.
#pragma once

#include <string>
#include <vector>

namespace castscope::cli {

std::string python_exe();

// Runs argv with this process's stdio (quiet: stdout and stderr to /dev/null); SIGINT is left to
// the child, which stops and exits 130, while this process waits for its status. The exit status,
// 128 + the signal if it was killed, or -1 if it could not be started.
int run_child(const std::vector<std::string>& args, bool quiet);

// run_child with this process's stdio, for a subcommand that is the child's work: a child that
// failed printed its own message, so this process exits with its status (1 error, 130
// cancelled). Error when `py` cannot be started.
void run_child_or_exit(const std::vector<std::string>& args, const std::string& py);

// Error unless `py` imports `module`, saying how to install the package; `why` says which command
// runs it, e.g. "eval runs the package (python3 -m castscope.eval)".
void require_python_module(const std::string& py, const std::string& module,
                           const std::string& why);

}  // namespace castscope::cli
