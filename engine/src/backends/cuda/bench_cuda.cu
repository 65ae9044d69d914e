// The GPU benchmark (castscope-bench, castscope-cli bench). Memory-bound figures are compared with
// the device-to-device copy measured in the same run, GEMMs with the cuBLASLt BF16 GEMM.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "castscope/matmul.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"

namespace castscope::gpu {
namespace {

using detail::grid_start;
using detail::grid_stride;
using detail::stream;
using detail::time_ms;

__global__ void fill_normal(float* out, int64_t n, uint64_t seed) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float u1 = (scalar::random_bits(seed, 2 * i) + 1.0f) * 0x1p-32f;
    const float u2 = scalar::random_bits(seed, 2 * i + 1) * 0x1p-32f;
    out[i] = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  }
}

__global__ void f32_to_bf16(const float* in, __nv_bfloat16* out, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) out[i] = __float2bfloat16_rn(in[i]);
}

DeviceTensor random_tensor(int64_t rows, int64_t cols, DType dt, uint64_t seed) {
  DeviceTensor f = DeviceTensor::empty(DType::F32, {rows, cols});
  fill_normal<<<detail::grid_for(rows * cols, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<float*>(f.mutable_data()), rows * cols, seed);
  CS_CUDA_LAUNCH("fill_normal");
  if (dt == DType::F32) return f;
  DeviceTensor b = DeviceTensor::empty(DType::BF16, {rows, cols});
  f32_to_bf16<<<detail::grid_for(rows * cols, 256, 1 << 16), 256, 0, stream()>>>(
      static_cast<const float*>(f.data()), static_cast<__nv_bfloat16*>(b.mutable_data()),
      rows * cols);
  CS_CUDA_LAUNCH("f32_to_bf16");
  return b;
}

}  // namespace

int run_benchmark(const BenchOptions& opt, std::FILE* out) {
  check_bench_options(opt);
  std::string reason;
  if (!available(&reason)) {
    std::fprintf(out, "castscope bench: no usable GPU (%s); nothing to measure.\n", reason.c_str());
    return 0;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  CS_CUDA(cudaGetDevice(&dev));
  CS_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::fprintf(out, "device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount, prop.totalGlobalMem / double(1 << 30));
  const int iters = std::max(3, opt.iters);
  struct Goal {
    std::string what;
    double value, target;
    bool higher_better;
  };
  std::vector<Goal> goals;

  // Copy bandwidth: the ceiling of every memory-bound figure below.
  const int64_t rows = opt.cast_rows, cols = opt.cast_cols;
  double copy_gbs = 0;
  {
    const size_t bytes = static_cast<size_t>(rows * cols) * 4;
    DeviceTensor a = DeviceTensor::empty(DType::U8, {static_cast<int64_t>(bytes)}, true);
    DeviceTensor b = DeviceTensor::empty(DType::U8, {static_cast<int64_t>(bytes)});
    const double ms = time_ms(
        [&] {
          CS_CUDA(cudaMemcpyAsync(b.mutable_data(), a.data(), bytes, cudaMemcpyDeviceToDevice,
                                  stream()));
        },
        3, iters);
    copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
    std::fprintf(out, "\ndevice-to-device copy: %.1f MiB in %.3f ms = %.1f GB/s (read + write)\n",
                 bytes / 1048576.0, ms, copy_gbs);
  }

  if (opt.casts) {
    std::fprintf(
        out, "\ncast throughput, %lldx%lld, compress mode (codes + scales written on the device)\n",
        static_cast<long long>(rows), static_cast<long long>(cols));
    std::fprintf(out, "%-10s %-15s %-12s %10s %10s %9s\n", "input", "dtype", "kernel", "ms", "GB/s",
                 "% copy");
    for (DType in : {DType::BF16, DType::F32}) {
      DeviceTensor x = random_tensor(rows, cols, in, 7);
      for (const std::string& cast : bench_cast_names()) {
        const char* name = cast.c_str();
        if (!opt.only.empty() &&
            std::find(opt.only.begin(), opt.only.end(), name) == opt.only.end())
          continue;
        CastOptions o;
        o.mode = CastMode::Compress;
        detail::CastRunner runner(x, DataType::parse(name), o, false);
        const double ms = time_ms([&] { runner.run(); }, 3, iters);
        const double gbs = runner.min_bytes() / (ms * 1e-3) / 1e9;
        std::fprintf(out, "%-10s %-15s %-12s %10.3f %10.1f %8.1f%%\n", dtype_name(in), name,
                     runner.path(), ms, gbs, 100.0 * gbs / copy_gbs);
        const std::string n(name);
        // NVFP4 reads its input twice (tensor absmax, then the cast): its goal is 90% of the
        // bound that sets, counted here as a share of the copy bandwidth for both reads.
        const bool nv = n == "nvfp4", tc = n.rfind("tcfp", 0) == 0, cb = n.rfind("icb", 0) == 0;
        const double pct = 100.0 * (nv ? (runner.min_bytes() + x.nbytes()) : runner.min_bytes()) /
                           (ms * 1e-3) / 1e9 / copy_gbs;
        goals.push_back({std::string("compress ") + name + " from " + dtype_name(in) +
                             (nv ? " (% of copy, both reads)" : " (% of copy)"),
                         pct,
                         nv   ? 90.0
                         : tc ? 50.0
                         : cb ? 25.0
                              : 90.0,
                         true});
      }
    }
  }

  if (opt.gemms) {
    std::string why;
    if (!gemm_available(&why)) {
      std::fprintf(out, "\nGEMMs skipped: %s\n", why.c_str());
    } else {
      std::fprintf(out,
                   "\nGEMMs (cuBLASLt), relative error vs fp64 on a 64x64 block: rel.err against "
                   "the float32 inputs (SNR = -20 log10 rel.err), prod.err against the product of "
                   "the operands as multiplied; 'tuned' (--tune N): the fastest of up to N "
                   "cuBLASLt candidates, each kind against the BF16 GEMM chosen the same way\n");
      std::fprintf(out, "%-6s %-5s %-11s %-4s %10s %10s %9s %9s %10s %8s %10s  %s\n", "size",
                   "algo", "kind", "out", "ms", "TFLOP/s", "x bf16", "time/bf16", "rel.err",
                   "SNR dB", "prod.err", "note");
      struct Run {
        GemmKind kind;
        bool bf16_out;
      };
      const Run runs[] = {{GemmKind::BF16, false},          {GemmKind::BF16, true},
                          {GemmKind::FP8, false},           {GemmKind::FP8Channel, false},
                          {GemmKind::FP8Block, false},      {GemmKind::FP8Block, true},
                          {GemmKind::TCFP12Weights, false}, {GemmKind::TCFP12Weights, true},
                          {GemmKind::TCFP12, false},        {GemmKind::TCFP16, false},
                          {GemmKind::MXFP8Block, false},    {GemmKind::NVFP4Block, false}};
      std::vector<int> tunes = {0};
      if (opt.gemm_autotune > 1) tunes.push_back(opt.gemm_autotune);
      for (int tune : tunes) {
        const char* algo = tune ? "tuned" : "heur";
        for (int s : opt.gemm_sizes) {
          double bf16_ms = 0, bf16_tf = 0;
          for (const Run& run : runs) {
            const GemmKind k = run.kind;
            GemmOptions g;
            g.m = g.n = g.k = s;
            g.iters = std::max(5, iters / 2);
            g.bf16_output = run.bf16_out;
            g.autotune = tune;
            const char* o = run.bf16_out ? "bf16" : "fp32";
            try {
              GemmResult r = run_gemm(k, g);
              if (k == GemmKind::BF16 && !run.bf16_out) bf16_ms = r.ms, bf16_tf = r.tflops;
              const double x = bf16_tf > 0 ? r.tflops / bf16_tf : 0,
                           tr = bf16_ms > 0 ? r.ms / bf16_ms : 0;
              const double snr = r.rel_error > 0 ? -20.0 * std::log10(r.rel_error) : 0;
              std::fprintf(
                  out, "%-6d %-5s %-11s %-4s %10.3f %10.1f %9.2f %9.2f %10.2e %8.2f %10.2e  %s\n",
                  s, algo, to_string(k), o, r.ms, r.tflops, x, tr, r.rel_error, snr,
                  r.product_rel_error, r.note.c_str());
              const std::string at = std::to_string(s) + "^3" + (tune ? ", tuned" : "");
              if (s == 8192 && !tune && k == GemmKind::FP8)
                goals.push_back({"FP8 GEMM 8192^3 (x BF16 TFLOP/s)", x, 1.75, true});
              if (s == 8192 && !tune && k == GemmKind::FP8Block)
                goals.push_back(
                    {std::string("FP8 block GEMM 8192^3, ") + o + " out (x BF16 TFLOP/s)", x, 1.55,
                     true});
              if ((s == 8192 || s == 4096) && k == GemmKind::TCFP12Weights)
                goals.push_back(
                    {std::string("tcfp12-w (") + o + " out) GEMM " + at + " (time / BF16)", tr, 1.0,
                     false});
              if (s == 8192 && k == GemmKind::TCFP12)
                goals.push_back(
                    {"tcfp12 both operands GEMM " + at + " (time / BF16)", tr, 1.3, false});
              if (s == 8192 && !tune && k == GemmKind::TCFP16)
                goals.push_back({"tcfp16 GEMM 8192^3 (time / BF16 time)", tr, 1.8, false});
              if (s == 8192 && !tune && k == GemmKind::FP8Channel)
                goals.push_back({"FP8 per-channel GEMM 8192^3 (x BF16 TFLOP/s)", x, 1.55, true});
            } catch (const Error& e) {
              std::fprintf(out, "%-6d %-5s %-11s %-4s unavailable: %s\n", s, algo, to_string(k), o,
                           e.what());
            }
          }
        }
      }
    }
  }

  if (opt.update) {
    const int64_t n = opt.update_n;
    DeviceTensor x = random_tensor(n, n, DType::F32, 11);
    std::fprintf(out,
                 "\ninteractive update of a %lldx%lld float32 tensor on the device: cast + value, "
                 "exponent and error histograms + stats + tile map, wall clock incl. copies to "
                 "the host; 'device': the tile map stays on the device and a view copies a "
                 "64x64-tile window, 'full': all of it is copied\n",
                 static_cast<long long>(n), static_cast<long long>(n));
    for (const char* name : {"mxfp8e4", "nvfp4", "fp8e4_block128"}) {
      CastOptions o;
      o.mode = CastMode::Actual;
      const DataType d = DataType::parse(name);
      auto update = [&](bool full) {
        DeviceCastResult r = cast(x, d, o, true);
        Stats s = compute_stats(x, r.values, r.counts.clipped);
        Histogram h = histogram(r.values, -8, 8, 256);
        Histogram eh = error_histogram(x, r.values, -0.5, 0.5, 256);
        ExponentHistogram xh = exponent_histogram(r.values);
        const DeviceTileMap dm = tile_map_device(x, r.values, r);
        const TileMap tm = full ? dm.download() : dm.window(0, 0, 64, 64);
        return s.snr_db + h.counts.size() + eh.counts.size() + xh.counts.size() +
               tm.scale_code.size();
      };
      double med[2];
      for (int full = 0; full < 2; ++full) {
        for (int i = 0; i < 3; ++i) update(full);
        std::vector<double> t;
        for (int i = 0; i < iters; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          update(full);
          t.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        std::sort(t.begin(), t.end());
        med[full] = t[t.size() / 2];
      }
      std::fprintf(out, "  %-15s device %8.3f ms   full %8.3f ms (medians of %d)\n", name, med[0],
                   med[1], iters);
      goals.push_back(
          {std::string("interactive update ") + name + ", device (ms)", med[0], 10.0, false});
    }
  }

  std::fprintf(out, "\n%-52s %10s %10s  %s\n", "goal", "measured", "target", "result");
  for (const Goal& g : goals) {
    const bool met = g.higher_better ? g.value >= g.target : g.value <= g.target;
    std::fprintf(out, "%-52s %10.2f %10.2f  %s\n", g.what.c_str(), g.value, g.target,
                 met ? "met" : "MISSED");
  }
  return 0;
}

}  // namespace castscope::gpu
