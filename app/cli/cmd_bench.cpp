// castscope-cli bench: the GPU benchmark (copy bandwidth, cast throughput, GEMMs, interactive
// update). Without a GPU it says why and succeeds.
#include <cstdio>

#include "castscope/device.hpp"
#include "cli/command.hpp"

namespace castscope::cli {
namespace {

void bench_cmd(CLI::App& app) {
  static gpu::BenchOptions o;
  static bool quick = false, no_casts = false, no_gemms = false, no_update = false;
  auto* sub = app.add_subcommand(
      "bench",
      "Measure the GPU backend: copy bandwidth, cast throughput, GEMMs, interactive update");
  sub->add_flag("--quick", quick, "Small sizes (a smoke run, not the reported figures)");
  sub->add_flag("--no-casts", no_casts, "Skip the cast throughput table");
  sub->add_flag("--no-gemms", no_gemms, "Skip the GEMM table");
  sub->add_flag("--no-update", no_update, "Skip the interactive-update timing");
  sub->add_option("--iters", o.iters, "Timed repetitions per figure (median reported)")
      ->check(CLI::Range(3, 1000));
  sub->callback([] {
    if (quick) {
      o.cast_rows = o.cast_cols = 4096;
      o.gemm_sizes = {2048};
    }
    o.casts = !no_casts;
    o.gemms = !no_gemms;
    o.update = !no_update;
    gpu::run_benchmark(o, stdout);
  });
}

Register reg(bench_cmd);

}  // namespace
}  // namespace castscope::cli
