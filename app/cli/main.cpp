#include <cstdio>
#include <exception>

#include "castscope/error.hpp"
#include "cli/command.hpp"

namespace castscope::cli {
std::vector<Registrar>& registrars() {
  static std::vector<Registrar> r;
  return r;
}
}  // namespace castscope::cli

int main(int argc, char** argv) {
  CLI::App app{
      "castscope-cli: cast tensors and checkpoints to low-precision datatypes and measure the "
      "error"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "castscope 0.1.0");
  for (auto& r : castscope::cli::registrars()) r(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // app.exit prints CLI11's message; --help and --version stay 0, every usage error is 2.
    return app.exit(e) == 0 ? 0 : castscope::cli::kExitUsage;
  } catch (const castscope::Cancelled&) {
    std::fprintf(stderr, "castscope-cli: cancelled\n");
    return 130;
  } catch (const castscope::Error& e) {
    std::fprintf(stderr, "castscope-cli: error: %s\n", e.what());
    return castscope::cli::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "castscope-cli: error: %s\n", e.what());
    return castscope::cli::kExitError;
  }
  return 0;
}
