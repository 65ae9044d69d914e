// What callers outside the engine need to know of the GPU: whether one is usable, how much
// crossed PCIe, waiting for queued work, and the GPU benchmark. Device-resident tensors and
// results reach them as exec::PlacedTensor / exec::PlacedResult (castscope/placed.hpp); the
// backend's own device types stay inside the engine (backends/device_api.hpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace castscope::gpu {

// True when a usable GPU is present; otherwise `reason` says why not.
bool available(std::string* reason = nullptr);

// Tensor-sized copies between host and device made through upload() / download() since the
// process started: what callers check to see that a device cast made no host round trip.
struct TransferCounters {
  uint64_t uploads = 0, downloads = 0;
  uint64_t upload_bytes = 0, download_bytes = 0;
};
TransferCounters transfer_counters();
// Waits until the engine's device work queued by the calling thread is done: results handed to
// another library are complete (a cast may still be permuting its outputs when it returns).
void synchronize();

// The GPU benchmark behind `castscope-bench` and `castscope-cli bench`: copy bandwidth, cast
// throughput, GEMM rates and the interactive update, printed as tables to `out`. Returns 0, or
// prints why nothing ran (no GPU) and returns 0 as well; throws Error for failures on the GPU.
struct BenchOptions {
  int64_t cast_rows = 16384, cast_cols = 16384;
  std::vector<int> gemm_sizes = {4096, 8192};
  int64_t update_n = 4096;
  int iters = 20;  // timed repetitions per figure (median reported)
  bool casts = true, gemms = true, update = true;
  // GEMMs: also time each kind with the fastest of this many cuBLASLt candidates (0: only the
  // heuristic's first choice).
  int gemm_autotune = 0;
  // Cast datatypes to time (names as in the cast table); empty: all of them.
  std::vector<std::string> only;
};
int run_benchmark(const BenchOptions& opt, std::FILE* out);
// The casts run_benchmark times, by datatype name; check_bench_options throws Error naming a
// BenchOptions::only entry outside them (run_benchmark calls it first, with or without a GPU).
const std::vector<std::string>& bench_cast_names();
void check_bench_options(const BenchOptions& opt);

}  // namespace castscope::gpu
