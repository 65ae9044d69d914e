// castscope-bench: the GPU benchmark of the CUDA backend (the same code as `castscope-cli bench`),
// then the app's own update: widgets::analyze, every view of one cast, on the device and on the
// host.
// Usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--iters N]
//        castscope-bench --host [--cli PATH] [--iters N]: the views' update on the CPU alone
//        castscope-bench --map CHECKPOINT [--dtypes A,B] [--cold] [--runs N]: the model map
//          sweep beside a plain read of the checkpoint's files, from the page cache and cold
//          (--act-tokens N: and with N rows of activations)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "castscope/device.hpp"
#include "castscope/io.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/metrics.hpp"
#include "castscope/modelmap.hpp"
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

// User and system CPU time of this process (all threads) or of its finished children, in ms.
struct CpuTimes {
  double user = 0, sys = 0;
};
CpuTimes cpu_times(int who = RUSAGE_SELF) {
  rusage u{};
  getrusage(who, &u);
  return {u.ru_utime.tv_sec * 1e3 + u.ru_utime.tv_usec * 1e-3,
          u.ru_stime.tv_sec * 1e3 + u.ru_stime.tv_usec * 1e-3};
}

// The 1-minute load average (runnable threads), to tell an idle machine from a shared one.
double load_average() {
  double l = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// castscope-cli next to this program (build/bench/.. -> build/app/castscope-cli), if built.
std::string default_cli(const char* argv0) {
  std::string self = argv0;
  const size_t slash = self.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
  const std::string cli = dir + "/../app/castscope-cli";
  return access(cli.c_str(), X_OK) == 0 ? cli : std::string();
}

// The views' update on the CPU alone (issue: fast without a GPU): widgets::analyze with the
// device off, every view of a datatype change on a 4096 x 4096 float32 tensor, beside what the
// CLI's `cast --stats` computes in the same process (the cast and the statistics). The goal is
// the app's: 150 ms a change on a 2-core machine.
int host_update(int64_t n, int iters, const std::string& cli, std::FILE* out) {
  Tensor x = Tensor::empty(DType::F32, {n, n});
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  float* p = x.mutable_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = nd(rng);
  widgets::retain_freed_memory();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const double load0 = load_average();
  std::fprintf(out,
               "castscope-bench --host: the app's update after a change of datatype with the views "
               "on the CPU\n"
               "(widgets::analyze, device off: the cast and every view: three histograms, "
               "statistics, tile map, mask) of a %lldx%lld float32 tensor; the input's own views "
               "carried over from the previous datatype, as the app carries them.\n"
               "Machine: %u hardware threads, load average %.2f at the start.\n"
               "Columns (medians of %d runs after a warm-up):\n"
               "  wall ms        the update's wall-clock time: the goal's figure (150 ms)\n"
               "  metrics first  wall time until the statistics reach the app (AnalysisOptions::"
               "on_metrics)\n"
               "  user / sys     CPU time of all the update's threads, in user and kernel mode\n"
               "  CPU/threads    (user + sys) / %u: the wall time the same work takes when the "
               "machine is idle and the threads share it evenly\n"
               "  cast+stats     in-process cast and statistics as `castscope-cli cast --stats` "
               "computes them\n",
               static_cast<long long>(n), static_cast<long long>(n), threads, load0, iters,
               threads);
  std::fprintf(out, "  %-15s %9s %14s %9s %9s %12s %11s\n", "dtype", "wall ms", "metrics first",
               "user ms", "sys ms", "CPU/threads", "cast+stats");
  const char* names[] = {"mxfp8e4", "nvfp4", "mxfp4e2", "int8_sc", "float8_e4m3fn", "bfloat16"};
  struct Row {
    std::string name;
    double wall, per_thread;
  };
  std::vector<Row> rows;
  // As the app holds it: the input's own views carry over from one datatype to the next.
  widgets::DeviceInput input;
  std::shared_ptr<const widgets::Analysis> shown;  // the app keeps the last update on screen
  for (const char* name : names) {
    const DataType d = DataType::parse(name);
    widgets::AnalysisOptions ao;
    ao.device = false;
    std::vector<double> tv, tm, tc, tu, ts;
    for (int i = 0; i <= iters; ++i) {
      double first = 0;
      const CpuTimes c0 = cpu_times();
      const auto t0 = std::chrono::steady_clock::now();
      ao.on_metrics = [&](const widgets::Analysis&) {
        first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
      };
      CastOptions co;
      co.device = Device::CPU;
      auto a = widgets::analyze(x, d, co, "bench", ao, nullptr, &input);
      const double t =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const CpuTimes c1 = cpu_times();
      shown = std::move(a);
      const auto t1 = std::chrono::steady_clock::now();
      const CastResult r = cast(x, d, co);
      const Stats st = compute_stats(x, r.values, r.counts.clipped);
      const double tcs =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      if (i == 0 || st.count != shown->stats.count) continue;  // warm-up
      tv.push_back(t), tm.push_back(first), tc.push_back(tcs);
      tu.push_back(c1.user - c0.user), ts.push_back(c1.sys - c0.sys);
    }
    const double per = (median(tu) + median(ts)) / threads;
    std::fprintf(out, "  %-15s %9.1f %14.1f %9.1f %9.1f %12.1f %11.1f\n", name, median(tv),
                 median(tm), median(tu), median(ts), per, median(tc));
    rows.push_back({name, median(tv), per});
  }
  double cli_wall = 0, cli_cpu = 0;
  if (!cli.empty()) {
    // The CLI as a user runs it, whole process (load, cast, statistics, save).
    char path[] = "/tmp/castscope_bench_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    const std::string in = std::string(path) + ".npy", outp = std::string(path) + "_out.npy";
    io::save_npy(in, x);
    std::vector<double> t, c;
    for (int i = 0; i <= iters; ++i) {
      const std::string cmd =
          cli + " cast " + in + " " + outp + " --dtype mxfp8e4 --stats --device cpu > /dev/null";
      const CpuTimes c0 = cpu_times(RUSAGE_CHILDREN);
      const auto t0 = std::chrono::steady_clock::now();
      if (std::system(cmd.c_str()) != 0) break;
      const CpuTimes c1 = cpu_times(RUSAGE_CHILDREN);
      if (i) {
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
        c.push_back(c1.user - c0.user + c1.sys - c0.sys);
      }
    }
    cli_wall = median(t), cli_cpu = median(c);
    std::fprintf(out,
                 "  castscope-cli cast --stats --device cpu, mxfp8e4, whole process: wall %.1f ms, "
                 "user + sys %.1f ms (median of %zu)\n",
                 cli_wall, cli_cpu, t.size());
    std::remove(in.c_str());
    std::remove(outp.c_str());
    std::remove(path);
  } else {
    std::fprintf(out, "  castscope-cli not found next to this program; pass --cli PATH\n");
  }
  const double load1 = load_average();
  std::fprintf(out, "\nLoad average %.2f at the end.%s\n", load1,
               std::max(load0, load1) > 0.5 * threads
                   ? " The machine was busy: other processes took CPU time, so the wall times "
                     "above are inflated; CPU/threads estimates the idle figure. Measure the goal "
                     "on an idle machine."
                   : "");
  std::fprintf(out, "\n%-40s %10s %12s %10s  %-8s %s\n", "goal: host update (ms)", "wall",
               "CPU/threads", "target", "result", "CLI cast --stats (whole process, mxfp8e4)");
  for (const Row& r : rows) {
    char cli_col[64] = "-";
    if (cli_wall > 0) std::snprintf(cli_col, sizeof cli_col, "%.1f ms", cli_wall);
    std::fprintf(out, "%-40s %10.1f %12.1f %10.1f  %-8s %s\n", r.name.c_str(), r.wall, r.per_thread,
                 150.0, r.wall <= 150.0 ? "met" : "MISSED", cli_col);
  }
  return 0;
}

// The model map sweep against a plain read of the checkpoint's files (issue: the 8B sweep at most
// 1.5x the read). The read is what `cat` does: read(2) of each file in turn into one buffer, one
// thread. Cold figures drop the page cache first (root only); without that right they are not
// measured and the output says so.
std::vector<std::string> checkpoint_files(const std::string& path) {
  const std::string suffix = ".index.json";
  if (path.size() < suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix))
    return {path};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0)
        out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

double plain_read_s(const std::vector<std::string>& files, uint64_t* bytes) {
  std::vector<char> buf(8u << 20);
  *bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& f : files) {
    const int fd = open(f.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot open '" + f + "'");
    for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;) *bytes += static_cast<uint64_t>(n);
    close(fd);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool drop_caches(std::string* why) {
  sync();
  std::FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (!f || std::fputs("3\n", f) < 0 || std::fclose(f) != 0) {
    *why = "cannot write /proc/sys/vm/drop_caches (needs root)";
    return false;
  }
  return true;
}

// The sweep with activations (the output-SNR column): synthetic [tokens, hidden] activations,
// hidden the commonest input width of the 2-D tensors. Each weight that takes them is uploaded
// once for all its columns and the activations once for the sweep: the uploads printed are
// checked against that count.
void map_act_bench(const std::string& path, const std::vector<std::string>& dtypes, int64_t tokens,
                   double plain_sweep_s, std::FILE* out) {
  const auto model = io::open_model(path);
  std::map<int64_t, int> widths;
  for (const io::TensorInfo& t : model->tensors())
    if (t.shape.size() == 2) ++widths[t.shape[1]];
  if (widths.empty()) return;
  const int64_t hidden =
      std::max_element(widths.begin(), widths.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  MapOptions o;
  o.dtypes = dtypes;
  o.cast.device = Device::CUDA;
  o.activations = synthetic_activations(tokens, hidden, 8, 20.0, 7);
  const auto t0 = std::chrono::steady_clock::now();
  const ModelMap m = sweep_model(*model, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t with_output = 0;
  for (const MapRow& r : m.rows) with_output += !r.cells.empty() && r.cells[0].has_output;
  std::fprintf(out,
               "  with activations [%lld, %lld]: sweep %7.3f s (%.2fx the sweep without), %zu of "
               "%zu tensors with an output SNR; operand uploads %llu (activations once + one "
               "per weight = %zu): %s\n",
               static_cast<long long>(tokens), static_cast<long long>(hidden), s, s / plain_sweep_s,
               with_output, m.rows.size(), static_cast<unsigned long long>(m.linear_uploads),
               1 + with_output,
               m.linear_uploads == 1 + with_output ? "once each" : "MORE THAN ONCE");
}

int map_bench(const std::string& path, const std::vector<std::string>& dtypes, bool cold, int runs,
              int64_t act_tokens, std::FILE* out) {
  std::string why;
  if (!gpu::available(&why)) {
    std::fprintf(out, "model map sweep: no GPU (%s)\n", why.c_str());
    return 0;
  }
  const std::vector<std::string> files = checkpoint_files(path);
  uint64_t bytes = 0;
  plain_read_s(files, &bytes);  // into the page cache
  auto sweep = [&](ModelMap* m) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto model = io::open_model(path);
    MapOptions o;
    o.dtypes = dtypes;
    o.cast.device = Device::CUDA;
    *m = sweep_model(*model, o);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::fprintf(out,
               "model map sweep of %s: %zu files, %.2f GB; %zu datatypes; wall clock of "
               "open + sweep (CUDA context started before); plain read: read(2) of each file, "
               "one thread, as cat does\n",
               path.c_str(), files.size(), bytes / 1e9, dtypes.size());
  std::vector<std::pair<std::string, double>> goals;
  double best_read = 1e30, best_sweep = 1e30;
  ModelMap m;
  for (int r = 0; r < runs; ++r) {
    uint64_t b = 0;
    const double tr = plain_read_s(files, &b);
    const double ts = sweep(&m);
    std::fprintf(out,
                 "  page cache, run %d: plain read %7.3f s (%6.2f GB/s)   sweep %7.3f s "
                 "(%zu tensors, %zu cells, backend %s)\n",
                 r + 1, tr, b / tr / 1e9, ts, m.rows.size(), m.rows.size() * dtypes.size(),
                 m.backend.c_str());
    best_read = std::min(best_read, tr);
    best_sweep = std::min(best_sweep, ts);
  }
  goals.push_back({"map sweep, page cache (x plain read)", best_sweep / best_read});
  if (act_tokens > 0) map_act_bench(path, dtypes, act_tokens, best_sweep, out);
  if (cold) {
    if (drop_caches(&why)) {
      uint64_t b = 0;
      const double tr = plain_read_s(files, &b);
      drop_caches(&why);
      const double ts = sweep(&m);
      std::fprintf(out,
                   "  cold (page cache dropped before each): plain read %7.3f s (%6.2f GB/s)"
                   "   sweep %7.3f s\n",
                   tr, b / tr / 1e9, ts);
      goals.push_back({"map sweep, cold (x plain read)", ts / tr});
    } else {
      std::fprintf(out, "  cold: not measured (%s)\n", why.c_str());
    }
  }
  std::fprintf(out, "\n%-52s %10s %10s  %s\n", "goal", "measured", "target", "result");
  for (const auto& [what, v] : goals)
    std::fprintf(out, "%-52s %10.2f %10.2f  %s\n", what.c_str(), v, 1.5,
                 v <= 1.5 ? "met" : "MISSED");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  castscope::gpu::BenchOptions o;
  bool host = false, cold = false;
  std::string cli = default_cli(argv[0]);
  const char* map = nullptr;
  int runs = 2;
  int64_t act_tokens = 0;
  std::vector<std::string> map_dtypes = {"mxfp4e2", "nvfp4", "mxfp6e2",
                                         "mxfp8e4", "mx6",   "int8_sc"};
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
    } else if (!std::strcmp(a, "--tune") && i + 1 < argc) {
      o.gemm_autotune = std::atoi(argv[++i]);
    } else if (!std::strcmp(a, "--map") && i + 1 < argc) {
      map = argv[++i];
    } else if (!std::strcmp(a, "--dtypes") && i + 1 < argc) {
      map_dtypes.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) map_dtypes.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (!std::strcmp(a, "--cold")) {
      cold = true;
    } else if (!std::strcmp(a, "--act-tokens") && i + 1 < argc) {
      act_tokens = std::atoll(argv[++i]);
    } else if (!std::strcmp(a, "--runs") && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(a, "--host")) {
      host = true;
    } else if (!std::strcmp(a, "--cli") && i + 1 < argc) {
      cli = argv[++i];
    } else if (!std::strcmp(a, "--iters") && i + 1 < argc) {
      o.iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: castscope-bench [--quick] [--no-casts] [--no-gemms] [--no-update] [--only A,B]\n"
          "                       [--iters N] [--tune N]\n"
          "       castscope-bench --host [--cli PATH/castscope-cli] [--iters N]   (CPU views)\n"
          "       castscope-bench --map CHECKPOINT [--dtypes A,B] [--cold] [--runs N]\n"
          "                       [--act-tokens N]   (also the sweep with N activation rows)\n");
      return 2;
    }
  }
  try {
    if (map) return map_bench(map, map_dtypes, cold, runs, act_tokens, stdout);
    if (host) return host_update(o.update_n, std::max(1, std::min(o.iters, 7)), cli, stdout);
    const int rc = castscope::gpu::run_benchmark(o, stdout);
    if (rc == 0 && o.update && castscope::gpu::available()) app_update(o.update_n, o.iters, stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "castscope-bench: error: %s\n", e.what());
    return 1;
  }
}
