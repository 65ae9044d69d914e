// The budget planner's exact knapsack (docs/planning.md, "Solver"): hundreds of tensors x 8
// candidates with errors falling about 4x per bit as quantization errors do, at budgets across
// the range. Counters: search nodes and bits per weight of the plan.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "castscope/planner.hpp"

namespace {

using castscope::KnapsackItem;

struct Instance {
  std::vector<std::vector<KnapsackItem>> groups;
  uint64_t lo = 0, hi = 0, values = 0;
};

Instance make(int tensors, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  std::uniform_int_distribution<int> dim(1, 64);
  const double bits[] = {4.25, 4.5, 4.5, 6.25, 6.5625, 8.25, 8.5, 16};
  Instance in;
  for (int t = 0; t < tensors; ++t) {
    const uint64_t n = 4096u * static_cast<uint64_t>(dim(rng));
    const double scale = u(rng) * static_cast<double>(n);
    std::vector<KnapsackItem> items;
    for (double b : bits)
      items.push_back(
          {static_cast<uint64_t>(b * static_cast<double>(n)), scale * std::pow(4.0, -b) * u(rng)});
    in.lo += items.front().size;
    in.hi += items.back().size;
    in.values += n;
    in.groups.push_back(std::move(items));
  }
  return in;
}

void BM_SolveMckp(benchmark::State& st) {
  const Instance in = make(static_cast<int>(st.range(0)), 1);
  const double f = static_cast<double>(st.range(1)) / 100.0;
  const uint64_t cap = in.lo + static_cast<uint64_t>(f * static_cast<double>(in.hi - in.lo));
  castscope::KnapsackSolution s;
  for (auto _ : st) {
    s = castscope::solve_mckp(in.groups, cap);
    benchmark::DoNotOptimize(s.error);
  }
  st.counters["nodes"] = static_cast<double>(s.nodes);
  st.counters["bpw"] = static_cast<double>(s.size) / static_cast<double>(in.values);
}
BENCHMARK(BM_SolveMckp)
    ->ArgsProduct({{100, 300, 1000}, {1, 10, 30, 60, 90}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
