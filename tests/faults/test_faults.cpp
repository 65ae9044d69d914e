// Fault tests: what a user's data looks like after a crash, a full disk or a vanishing input.
// Each scenario runs in a child process so that a crash shows up as a failed test, not a dead
// test runner.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "castscope/export.hpp"
#include "castscope/io.hpp"

namespace fs = std::filesystem;
using namespace castscope;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("castscope-faults-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Tensor random_tensor(Shape s, uint64_t seed) {
  Tensor t = Tensor::empty(DType::F32, std::move(s));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = nd(rng);
  return t;
}

MemoryModel model(int tensors, uint64_t seed) {
  MemoryModel m;
  for (int i = 0; i < tensors; ++i)
    m.add("layers." + std::to_string(i) + ".weight", random_tensor({256, 512}, seed + i));
  return m;
}

// Runs fn in a child; returns its wait status.
template <class F>
int in_child(F fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = fn();
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// Exports a model of 8 tensors (of this seed) to `out` in a child process that dies with SIGKILL
// (nothing runs after it: no destructors, no cleanup) once the export's progress passes `at`,
// well under way; the child's wait status.
int export_killed_at(double at, const fs::path& out, const char* dtype, Layout layout,
                     uint64_t seed) {
  return in_child([&] {
    MemoryModel m = model(8, seed);
    ExportOptions o;
    o.layout = layout;
    o.cast.device = Device::CPU;
    JobControl job;
    job.on_progress = [at](double f) {
      if (f > at) ::kill(::getpid(), SIGKILL);
    };
    export_model(m, out.string(), plan_for_dtype(dtype), o, &job);
    return 0;
  });
}

std::vector<fs::path> files_in(const fs::path& d) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(d)) v.push_back(e.path().filename());
  return v;
}

TEST(Faults, ExportKilledMidwayLeavesThePreviousFile) {
  for (const char* layout : {"native", "compressed-tensors", "gguf", "gpt-oss"}) {
    const fs::path dir = scratch(std::string("kill-") + layout);
    const fs::path out = dir / (std::string(layout) == "gguf" ? "out.gguf" : "out.safetensors");
    {
      std::ofstream f(out, std::ios::binary);
      f << "previous export, must survive";
    }
    const std::string before = read_all(out);
    const int status = export_killed_at(0.3, out, "mxfp4e2", parse_layout(layout), 1);
    ASSERT_TRUE(WIFSIGNALED(status)) << layout << ": the export finished before it could be killed";
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    EXPECT_EQ(read_all(out), before) << layout << ": the previous file changed";
    fs::remove_all(dir);
  }
}

TEST(Faults, ExportKilledWithoutPreviousFileLeavesNothingAtTheTarget) {
  const fs::path dir = scratch("kill-new");
  const fs::path out = dir / "out.safetensors";
  const int status = export_killed_at(0.5, out, "nvfp4", Layout::Native, 2);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

// A full disk (simulated by a file-size limit: writes fail with EFBIG) is an error naming the
// file, and leaves no file at the target and the previous one intact.
TEST(Faults, FullDiskIsAnErrorAndLeavesNoPartialFile) {
  const fs::path dir = scratch("full");
  struct Case {
    const char* name;
    std::function<void(const std::string&)> write;
  };
  const Tensor big = random_tensor({512, 512}, 3);
  const Case cases[] = {
      {"out.npy", [&](const std::string& p) { io::save_npy(p, big); }},
      {"packed.safetensors",
       [&](const std::string& p) {
         CastOptions o;
         o.mode = CastMode::Compress;
         o.device = Device::CPU;
         io::save_packed(p, {{"w", cast(big, DataType::parse("mxfp8e4"), o)}});
       }},
      {"export.safetensors",
       [&](const std::string& p) {
         MemoryModel m = model(4, 4);
         ExportOptions o;
         o.cast.device = Device::CPU;
         export_model(m, p, plan_for_dtype("mxfp8e4"), o);
       }},
  };
  for (const Case& c : cases) {
    const fs::path out = dir / c.name;
    {
      std::ofstream f(out, std::ios::binary);
      f << "old";
    }
    const int status = in_child([&] {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit lim{64 * 1024, 64 * 1024};
      ::setrlimit(RLIMIT_FSIZE, &lim);
      try {
        c.write(out.string());
      } catch (const Error& e) {
        const std::string msg = e.what();
        return msg.find(c.name) != std::string::npos ? 0 : 4;  // the message names the file
      }
      return 2;  // no error: the limit was not hit
    });
    ASSERT_TRUE(WIFEXITED(status)) << c.name << " crashed";
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << c.name << " (2: no error, 3: not a castscope::Error, 4: message without the file)";
    EXPECT_EQ(read_all(out), "old") << c.name;
    for (const fs::path& f : files_in(dir)) {
      const std::string s = f.string();
      EXPECT_TRUE(s == "out.npy" || s == "packed.safetensors" || s == "export.safetensors")
          << "left behind: " << s;
    }
  }
  fs::remove_all(dir);
}

// An input that disappears or shrinks after it was opened gives an error (or, for a deleted but
// still mapped file, the data), never a crash.
TEST(Faults, VanishingOrShrinkingInput) {
  for (const char* what : {"deleted", "truncated", "emptied"}) {
    const fs::path dir = scratch(std::string("vanish-") + what);
    const fs::path in = dir / "model.safetensors";
    save_safetensors(in.string(),
                     {{"a", random_tensor({64, 64}, 5)}, {"b", random_tensor({128, 64}, 6)}}, {});
    const int status = in_child([&] {
      auto m = io::open_model(in.string());
      if (std::string(what) == "deleted") fs::remove(in);
      if (std::string(what) == "truncated") fs::resize_file(in, fs::file_size(in) - 20000);
      if (std::string(what) == "emptied") fs::resize_file(in, 0);
      try {
        Tensor t = m->load("b");
        return t.numel() == 128 * 64 ? 0 : 5;
      } catch (const Error& e) {
        return std::string(e.what()).find("model.safetensors") != std::string::npos ? 0 : 4;
      }
    });
    ASSERT_TRUE(WIFEXITED(status))
        << what << ": crashed with signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << what;
    fs::remove_all(dir);
  }
}

TEST(Faults, UnreadableInputsAreErrors) {
  const fs::path dir = scratch("unreadable");
  fs::create_directories(dir / "dir.safetensors");
  EXPECT_THROW(io::open_model((dir / "missing.safetensors").string()), Error);
  EXPECT_THROW(io::open_model((dir / "dir.safetensors").string()), Error);
  EXPECT_THROW(io::load_npy((dir / "missing.npy").string()), Error);
  EXPECT_THROW(io::open_model("/dev/null"), Error);
  fs::remove_all(dir);
}

}  // namespace
