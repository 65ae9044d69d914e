// A small fork-join helper: chunks of an index range are handed to worker threads through an
// atomic counter; cancellation and progress are checked between chunks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope::detail {

// Threads for a job that asked for `requested` (0: all). CASTSCOPE_THREADS caps the default, for
// users sharing a machine and for reproducible runs (the fuzz targets' coverage must not depend
// on how chunks fell to threads).
inline int hardware_threads(int requested) {
  if (requested > 0) return requested;
  static const int cap = [] {
    const char* env = std::getenv("CASTSCOPE_THREADS");
    const int v = env ? std::atoi(env) : 0;
    return v > 0 ? v : 0;
  }();
  if (cap > 0) return cap;
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

// Calls f(begin, end) over [0, n) in chunks of about `grain` indices.
template <class F>
void parallel_for(int64_t n, int64_t grain, int threads, JobControl* job, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(hardware_threads(threads), chunks));
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&] {
    try {
      for (;;) {
        if (job) job->check();
        const int64_t c = next.fetch_add(1);
        if (c >= chunks) break;
        const int64_t b = c * grain;
        f(b, std::min(n, b + grain));
        const int64_t d = done.fetch_add(1) + 1;
        if (job && (d % 16 == 0 || d == chunks)) job->report(static_cast<double>(d) / chunks);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      next.store(chunks);
    }
  };
  if (nt <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(nt - 1);
    for (int i = 0; i + 1 < nt; ++i) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace castscope::detail
