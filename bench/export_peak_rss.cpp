// Peak memory and throughput of a streamed export (docs/performance.md, "Export memory").
//
//   export_peak_rss [--gb 2.0] [--dir DIR] [--layout native|gpt-oss|compressed-tensors|gguf]
//                   [--plan mixed|DTYPE] [--device auto|cpu|cuda] [--keep]
//
// Writes a synthetic checkpoint of bf16 / f32 2-D tensors (in a child process, so that its
// memory does not count), exports it with the plan, and reports the peak RSS of the export
// (getrusage ru_maxrss) plus the peak anonymous and file-backed RSS sampled from
// /proc/self/status: file-backed pages are the memory-mapped source, which the kernel can drop
// at any time; anonymous memory is what the export itself holds. Not run in CI.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "castscope/export.hpp"
#include "castscope/io.hpp"

using namespace castscope;

namespace {

struct Args {
  double gb = 0.05;  // small by default
  std::string dir;
  std::string layout = "native";
  std::string plan = "mixed";
  std::string device = "auto";
  bool keep = false;
};

long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::atol(line.c_str() + n + 1);
  return 0;
}

// Layers of [4096, 4096] tensors alternating bf16 and f32, plus a 1-D norm per layer.
void write_checkpoint(const std::string& path, double gb) {
  SafetensorsStreamWriter w(path);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const uint64_t target = static_cast<uint64_t>(gb * 1e9);
  const int64_t rows = 4096, cols = 4096;
  for (int layer = 0; w.data_bytes() < target; ++layer) {
    const std::string pre = "model.layers." + std::to_string(layer);
    for (const char* part : {".mlp.up_proj.weight", ".self_attn.o_proj.weight"}) {
      const bool bf16 = part[1] == 'm';
      Tensor t = Tensor::empty(bf16 ? DType::BF16 : DType::F32, {rows, cols});
      for (int64_t i = 0; i < t.numel(); ++i) {
        // A roughly Gaussian value with a spread of scales: sum of uniforms times a power of two.
        const uint64_t r = next();
        const float u =
            (static_cast<float>(r & 0xFFFF) + static_cast<float>((r >> 16) & 0xFFFF) - 65535.0f) /
            32768.0f;
        const float v = std::ldexp(u, static_cast<int>((r >> 40) % 8) - 6);
        if (bf16)
          t.mutable_ptr<uint16_t>()[i] = float_to_bf16(v);
        else
          t.mutable_ptr<float>()[i] = v;
      }
      w.add(pre + part, t);
      if (w.data_bytes() >= target) break;
    }
    Tensor norm = Tensor::empty(DType::F32, {cols});
    for (int64_t i = 0; i < cols; ++i) norm.mutable_ptr<float>()[i] = 1.0f;
    w.add(pre + ".input_layernorm.weight", norm);
  }
  w.finish({{"format", "pt"}});
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--gb")
      a.gb = std::atof(val().c_str());
    else if (k == "--dir")
      a.dir = val();
    else if (k == "--layout")
      a.layout = val();
    else if (k == "--plan")
      a.plan = val();
    else if (k == "--device")
      a.device = val();
    else if (k == "--keep")
      a.keep = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--gb N] [--dir DIR] [--layout L] [--plan mixed|DTYPE] [--device "
                   "auto|cpu|cuda] [--keep]\n",
                   argv[0]);
      return 2;
    }
  }
  namespace fs = std::filesystem;
  const fs::path dir = a.dir.empty() ? fs::temp_directory_path() /
                                           ("castscope_export_bench_" + std::to_string(::getpid()))
                                     : fs::path(a.dir);
  fs::create_directories(dir);
  const std::string src = (dir / "synthetic.safetensors").string();
  const std::string out =
      (dir / (a.layout == "gguf" ? "export.gguf" : "export.safetensors")).string();
  try {
    auto t0 = std::chrono::steady_clock::now();
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        write_checkpoint(src, a.gb);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writing the checkpoint failed: %s\n", e.what());
        ::_exit(1);
      }
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(child, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    const double gen_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ExportPlan plan = a.plan == "mixed" ? parse_plan(R"({"default": "keep", "rules": [
        {"pattern": "*.mlp.*", "dtype": "mxfp4e2", "rank": 2},
        {"pattern": "*.self_attn.*", "dtype": "nvfp4", "rank": 2}]})",
                                                     "mixed")
                                        : plan_for_dtype(a.plan);
    if (a.layout == "gpt-oss" || a.layout == "gguf") plan = plan_for_dtype("mxfp4e2");
    ExportOptions opt;
    opt.layout = parse_layout(a.layout);
    opt.cast.device = parse_device(a.device);
    const long rss_before = status_kb("VmRSS:");
    std::atomic<bool> done{false};
    long peak_anon = 0, peak_file = 0;
    std::thread sampler([&] {
      while (!done.load()) {
        peak_anon = std::max(peak_anon, status_kb("RssAnon:"));
        peak_file = std::max(peak_file, status_kb("RssFile:"));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    t0 = std::chrono::steady_clock::now();
    ExportReport rep;
    {
      const auto model = io::open_model(src);
      rep = export_model(*model, out, plan, opt);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    done = true;
    sampler.join();
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    size_t largest = 0;
    for (const ExportedTensor& t : rep.tensors) largest = std::max<size_t>(largest, t.bytes_in);
    std::printf("checkpoint        %.3f GB in %zu tensors (largest %.1f MB), written in %.1f s\n",
                rep.bytes_in / 1e9, rep.tensors.size(), largest / 1e6, gen_s);
    const BackendInfo bi = backend_info();
    const bool gpu = a.device != "cpu" && bi.cuda_available;
    std::printf(
        "export            layout %s, plan %s, %s: %.3f GB out in %.2f s = %.1f MB/s of source\n",
        a.layout.c_str(), a.plan.c_str(), gpu ? bi.device_name.c_str() : "CPU backend",
        rep.bytes_out / 1e9, s, rep.bytes_in / 1e6 / s);
    std::printf("peak RSS          %.1f MB (getrusage ru_maxrss; %.1f MB before the export)\n",
                ru.ru_maxrss / 1024.0, rss_before / 1024.0);
    std::printf("peak anon RSS     %.1f MB (sampled every 5 ms)\n", peak_anon / 1024.0);
    std::printf("peak file RSS     %.1f MB (memory-mapped source pages, reclaimable)\n",
                peak_file / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (!a.keep) fs::remove_all(dir);
    return 1;
  }
  if (!a.keep) fs::remove_all(dir);
  return 0;
}
