// CPU cast throughput on a 4096x4096 float32 tensor (goals in docs/performance.md, "CPU cast
// engine"). Run: ./build/bench/cpu_cast_bench
// items_per_second uses wall time; the CPU column is the whole process's CPU time, which stays
// meaningful when the machine is shared (wall-clock throughput on an idle machine is about
// threads x items / CPU time).
#include <benchmark/benchmark.h>

#include <random>

#include "castscope/cast.hpp"

namespace {

using namespace castscope;

const Tensor& input() {
  static const Tensor x = [] {
    Tensor t = Tensor::empty(DType::F32, {4096, 4096});
    std::mt19937_64 rng(20261121);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    float* p = t.mutable_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = nd(rng);
    return t;
  }();
  return x;
}

void cast_bench(benchmark::State& state, const char* dtype, CastMode mode, int threads = 0) {
  const DataType d = DataType::parse(dtype);
  CastOptions o;
  o.device = Device::CPU;
  o.mode = mode;
  o.threads = threads;
  const Tensor& x = input();
  for (auto _ : state) {
    CastResult r = cast(x, d, o);
    benchmark::DoNotOptimize(r.values.data());
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}

}  // namespace

#define CAST_BENCH(name, mode)                                        \
  BENCHMARK_CAPTURE(cast_bench, name##_##mode, #name, CastMode::mode) \
      ->Unit(benchmark::kMillisecond)                                 \
      ->MeasureProcessCPUTime()                                       \
      ->UseRealTime()

CAST_BENCH(mxfp4e2, Virtual);
CAST_BENCH(mxfp8e4, Virtual);
CAST_BENCH(mxint8, Virtual);
CAST_BENCH(nvfp4, Virtual);
CAST_BENCH(int8_sc, Virtual);
CAST_BENCH(bfloat16, Virtual);
CAST_BENCH(tcfp8, Virtual);
CAST_BENCH(uint4_ss32, Virtual);
CAST_BENCH(float8_e4m3fn, Virtual);
CAST_BENCH(mxfp4e2, Compress);
CAST_BENCH(mxfp8e4, Compress);
CAST_BENCH(nvfp4, Compress);
CAST_BENCH(int8_sc, Compress);
CAST_BENCH(uint4_ss32, Compress);
CAST_BENCH(icb44fi4_e32, Compress);
CAST_BENCH(icb44fi3_f32s8, Compress);

// One thread, for the per-thread comparison with ml_dtypes' astype (bench/cpu_vs_ml_dtypes.py).
#define CAST_BENCH_1T(name, mode)                                                  \
  BENCHMARK_CAPTURE(cast_bench, name##_##mode##_1thread, #name, CastMode::mode, 1) \
      ->Unit(benchmark::kMillisecond)                                              \
      ->MeasureProcessCPUTime()                                                    \
      ->UseRealTime()

CAST_BENCH_1T(bfloat16, Virtual);
CAST_BENCH_1T(float16, Virtual);
CAST_BENCH_1T(float8_e4m3fn, Virtual);
CAST_BENCH_1T(float8_e5m2, Virtual);
// Codes (bfloat16 / float16 / fp8 bits): the same output as astype.
CAST_BENCH_1T(bfloat16, Actual);
CAST_BENCH_1T(float16, Actual);
CAST_BENCH_1T(float8_e4m3fn, Actual);
CAST_BENCH_1T(float8_e5m2, Actual);

BENCHMARK_MAIN();
