// castscope-bench: the GPU benchmark of the CUDA backend (the same code as `castscope-cli bench`).
// Usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--iters N]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "castscope/cuda_stats.hpp"

int main(int argc, char** argv) {
  castscope::gpu::BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--quick")) {
      o.cast_rows = o.cast_cols = 4096;
      o.gemm_sizes = {2048};
      o.iters = 5;
    } else if (!std::strcmp(a, "--no-casts")) {
      o.casts = false;
    } else if (!std::strcmp(a, "--no-gemms")) {
      o.gemms = false;
    } else if (!std::strcmp(a, "--no-update")) {
      o.update = false;
    } else if (!std::strcmp(a, "--iters") && i + 1 < argc) {
      o.iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--iters N]\n");
      return 2;
    }
  }
  try {
    return castscope::gpu::run_benchmark(o, stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "castscope-bench: error: %s\n", e.what());
    return 1;
  }
}
