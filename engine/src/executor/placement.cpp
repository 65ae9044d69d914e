// Placement: GPU start-up off the critical path, where Device::Auto runs a cast (cast.hpp), and
// the executor's decision for every kind of work (executor.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backends/backend.hpp"
#include "castscope/cast.hpp"
#include "castscope/executor.hpp"
#include "core/parallel.hpp"

namespace castscope {

namespace {

struct Starter {
  std::mutex mu;
  std::thread thread;
  std::atomic<bool> asked{false}, done{false}, ok{false}, stop{false};
  ~Starter() {
    // A thread still creating the context must not outlive main: joining here is the fallback
    // for callers that did not call finish_gpu_start().
    if (thread.joinable()) thread.join();
  }
};

Starter& starter() {
  static Starter s;
  return s;
}

std::atomic<bool>& context_seen() {
  static std::atomic<bool> seen{false};
  return seen;
}

int64_t env_min_elements() {
  static const int64_t v = [] {
    const char* e = std::getenv("CASTSCOPE_GPU_MIN_ELEMENTS");
    return e ? std::atoll(e) : -1;
  }();
  return v;
}

// Casts the CPU engine runs on its vectorized fast paths (engine/src/cpu/fast_*): hundreds of
// millions of values per second per thread. TCFP, codebooks and the rest take the generic path,
// about ten times slower, so the GPU pays off sooner for them.
bool cpu_fast(const DataType& d) {
  return family_traits(d.family()).grammar;
}

int64_t detail_threads() {
  return detail::hardware_threads(0);
}

}  // namespace

namespace exec {
void count_cpu_cast(int64_t n);
}

void start_gpu_in_background() {
  Starter& s = starter();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.asked.exchange(true)) return;
  s.thread = std::thread([&s] {
    // CASTSCOPE_GPU_START_DELAY_MS holds the start back (a slow driver, simulated): what shows
    // that nothing on the app's first frame or a small command waits for the context.
    if (const char* e = std::getenv("CASTSCOPE_GPU_START_DELAY_MS")) {
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoll(e));
      while (!s.stop.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string why;
    const bool ok = !s.stop.load() && cuda::start_context(&why);
    s.ok.store(ok);
    if (ok) context_seen().store(true);
    s.done.store(true);
  });
}

bool gpu_starting() {
  const Starter& s = starter();
  return s.asked.load() && !s.done.load();
}

bool gpu_running() {
  return context_seen().load();
}

void finish_gpu_start() {
  Starter& s = starter();
  s.stop.store(true);  // a start still held back by the delay is not begun at exit
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.thread.joinable()) s.thread.join();
}

int64_t auto_gpu_min_elements(const DataType& dtype, bool running) {
  if (env_min_elements() >= 0) return env_min_elements();
  // Measured with `castscope-cli cast --stats` on the GPU machine (16 threads, H200;
  // docs/performance.md, "Start-up"): with the GPU the command costs about 0.4 s more at any
  // size (the context), and then about 5.8 ns per element (file I/O, upload, download), against
  // 6.5 ns for a fast-path cast on the CPU and 8 to 12 ns for TCFP and codebooks. At 8192 x 8192
  // the CPU still finished first for every datatype measured (mxfp8e4 530 / 921 ms, tcfp12 872 /
  // 908 ms, icb44fi4_e32 646 / 842 ms). The CPU's share scales with its threads.
  const int64_t threads = detail_threads();
  const bool fast = cpu_fast(dtype);
  // With the context up only the transfers count against the GPU. For the fast paths they still
  // cost about what the CPU's 16 threads take: the exporter (2 GB of [4096, 4096] tensors, host
  // memory) took 1.53 s on the CPU, 2.08 s with --device cuda and 1.55 s with auto on the H100
  // machine. TCFP and codebooks, ten times slower on the CPU, go to a running GPU much sooner.
  if (running)
    return std::max<int64_t>(int64_t{1} << 18,
                             (fast ? int64_t{1} << 28 : int64_t{1} << 22) * threads / 16);
  return fast ? (int64_t{1} << 31)
              : std::max<int64_t>(int64_t{1} << 24, (int64_t{1} << 28) * threads / 16);
}

Device resolve_auto_device(int64_t n, const DataType& dtype) {
  if (n >= auto_gpu_min_elements(dtype, gpu_running())) return Device::CUDA;
  exec::count_cpu_cast(n);
  return Device::CPU;
}

namespace detail {
// cast.cpp marks the context as up after a cast ran on the GPU.
void note_gpu_context() {
  context_seen().store(true);
}
}  // namespace detail

namespace exec {

const char* to_string(Work w) {
  switch (w) {
    case Work::Cast:
      return "cast";
    case Work::Rotation:
      return "rotation";
    case Work::Views:
      return "views";
    case Work::Linear:
      return "linear layer";
    case Work::Sweep:
      return "sweep";
  }
  return "?";
}

Placement decide(Work kind, Device requested, int64_t n, const DataType* dtype,
                 const DeviceFacts& facts, OnFailure policy) {
  if (requested == Device::CPU) return {kind, Device::CPU, "cpu requested", false};
  if (dtype) {
    // Families without device kernels (ggml's block formats; for the views also codebooks,
    // whose tile maps live on the host) run on the CPU for every device.
    const FamilyTraits& fam = family_traits(dtype->family());
    const bool has = kind == Work::Views ? fam.device_views : fam.device_cast;
    if ((kind == Work::Cast || kind == Work::Views) && !has)
      return {kind, Device::CPU, std::string("no device kernels for ") + dtype->str(), false};
  }
  if (requested == Device::Auto) {
    if (kind == Work::Cast && dtype) {
      // A single cast weighs the GPU's start-up and transfers against the CPU's time.
      const int64_t min = auto_gpu_min_elements(*dtype, facts.running);
      if (n < min)
        return {kind, Device::CPU,
                "auto: " + std::to_string(n) + " values, below the " + std::to_string(min) +
                    " from which the GPU finishes first",
                false};
    }
    // The views finish on the host before a GPU that is still starting would be up.
    if (kind == Work::Views && facts.starting)
      return {kind, Device::CPU, "auto: the GPU is still starting", false};
  }
  std::string why;
  if (!facts.available || !facts.available(&why)) {
    if (why.empty()) why = "no device backend";
    const std::string reason = "no usable GPU (" + why + ")";
    // Under Throw the device attempt runs and reports the failure in its own words.
    return {kind, policy == OnFailure::Throw ? Device::CUDA : Device::CPU, reason, true};
  }
  return {kind, Device::CUDA, requested == Device::Auto ? "auto: a usable GPU" : "cuda requested",
          false};
}

void count_cpu_cast(int64_t n) {
  // A job of many casts (an export, a report) starts the GPU in the background once the casts
  // already done on the CPU took about as long as the context takes to come up; the first cast
  // never does, so a one-tensor command exits without waiting for a start it did not use.
  static std::atomic<int64_t> cpu_work{0};
  if (!gpu_running() && env_min_elements() < 0) {
    const int64_t before = cpu_work.fetch_add(n);
    if (before >= (int64_t{1} << 28) * detail_threads() / 16) start_gpu_in_background();
  }
}

}  // namespace exec

}  // namespace castscope
