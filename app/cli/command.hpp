// Subcommands register themselves here, so each lives in its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace castscope::cli {

using Registrar = std::function<void(CLI::App&)>;
std::vector<Registrar>& registrars();

struct Register {
  explicit Register(Registrar r) { registrars().push_back(std::move(r)); }
};

// Exit codes: 0 success, 1 bad input / failure (message on stderr), 2 usage error, 130 cancelled.
constexpr int kExitError = 1;

}  // namespace castscope::cli
