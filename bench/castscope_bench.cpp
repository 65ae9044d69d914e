// castscope-bench: the GPU benchmark of the CUDA backend (the same code as `castscope-cli bench`),
// then the app's own update: widgets::analyze, every view of one cast, on the device and on the
// host.
// Usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--iters N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "castscope/cuda_stats.hpp"
#include "castscope/widgets/analysis.hpp"

namespace {

using namespace castscope;

// Median wall time of `iters` analyses (after one warm-up), in ms; on_device (when given) says
// where the views ran.
double time_analysis(const Tensor& x, const DataType& d, const widgets::AnalysisOptions& ao,
                     widgets::DeviceInput* input, int iters, bool* on_device = nullptr) {
  auto once = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto a = widgets::analyze(x, d, {}, "bench", ao, nullptr, input);
    if (on_device) *on_device = a->on_device;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  once();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) t.push_back(once());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// What the app computes when a view changes: cast, value / log / exponent / error histograms,
// statistics, tile map (all of it, as the heatmap draws it) and mask image.
void app_update(int64_t n, int iters, std::FILE* out) {
  Tensor x = Tensor::empty(DType::F32, {n, n});
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  float* p = x.mutable_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = nd(rng);
  std::fprintf(out,
               "\napp update (widgets::analyze) of a %lldx%lld float32 tensor: every view of one "
               "cast, wall clock; device: the tensor uploaded once and kept, views computed "
               "there, freed memory retained as the app does it (and with the C library's "
               "defaults); host: views computed on the host (cast on the GPU)\n",
               static_cast<long long>(n), static_cast<long long>(n));
  widgets::DeviceInput input;
  widgets::AnalysisOptions host;
  host.device = false;
  const char* names[] = {"mxfp8e4", "nvfp4", "mxfp4e2", "fp8e4_block128", "float8_e4m3fn"};
  // First with the C library's defaults, then as the app runs (retain_freed_memory at start).
  std::vector<double> plain;
  for (const char* name : names)
    plain.push_back(time_analysis(x, DataType::parse(name), {}, &input, iters));
  widgets::retain_freed_memory();
  std::vector<std::pair<std::string, double>> goals;
  for (size_t i = 0; i < std::size(names); ++i) {
    const DataType d = DataType::parse(names[i]);
    bool dev = false;
    const double td = time_analysis(x, d, {}, &input, iters, &dev);
    const double th = time_analysis(x, d, host, nullptr, std::max(1, iters / 4));
    std::fprintf(out, "  %-15s device %8.3f ms%s (default malloc %8.3f ms)   host %9.3f ms\n",
                 names[i], td, dev ? "" : " (ran on the host)", plain[i], th);
    goals.push_back({std::string("app update ") + names[i] + ", device (ms)", dev ? td : 1e9});
  }
  std::fprintf(out, "\n%-52s %10s %10s  %s\n", "goal", "measured", "target", "result");
  for (const auto& [what, v] : goals)
    std::fprintf(out, "%-52s %10.2f %10.2f  %s\n", what.c_str(), v, 10.0,
                 v <= 10.0 ? "met" : "MISSED");
}

}  // namespace

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
    } else if (!std::strcmp(a, "--only") && i + 1 < argc) {
      // A comma-separated list of cast datatypes: quick runs while working on one kernel.
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) o.only.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (!std::strcmp(a, "--iters") && i + 1 < argc) {
      o.iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--only A,B]\n"
          "                       [--iters N]\n");
      return 2;
    }
  }
  try {
    const int rc = castscope::gpu::run_benchmark(o, stdout);
    if (rc == 0 && o.update && castscope::gpu::available()) app_update(o.update_n, o.iters, stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "castscope-bench: error: %s\n", e.what());
    return 1;
  }
}
