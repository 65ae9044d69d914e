// Shared by the reader fuzz targets: the input goes to a file with the format's extension (the
// readers memory-map files), then the whole model is opened, listed and loaded. Only
// castscope::Error is an acceptable failure; anything else reaches libFuzzer as a crash.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "castscope/io.hpp"

namespace castscope::fuzz {

inline std::string scratch_path(const char* ext) {
  static const std::string dir = [] {
    const char* base = ::access("/dev/shm", W_OK) == 0
                           ? "/dev/shm"
                           : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    // The path reaches error messages, so it shapes the coverage: a reproducible run names a
    // fixed slot (CASTSCOPE_FUZZ_SLOT); otherwise the pid keeps parallel runs apart.
    const char* slot = std::getenv("CASTSCOPE_FUZZ_SLOT");
    return std::string(base) + "/castscope-fuzz-" +
           (slot && *slot ? std::string(slot) : std::to_string(::getpid()));
  }();
  static const bool made = [] { return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST; }();
  (void)made;
  return dir + "/input" + ext;
}

inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) std::abort();
    done += static_cast<size_t>(w);
  }
  ::close(fd);
}

inline void open_list_load(const uint8_t* data, size_t size, const char* ext) {
  const std::string path = scratch_path(ext);
  write_input(path, data, size);
  try {
    auto m = io::open_model(path);
    for (const io::TensorInfo& t : m->tensors()) {
      try {
        Tensor x = m->load(t.name);
        if (x.numel() != numel(t.shape)) std::abort();  // load must give the listed shape
        Tensor r = m->load_raw(t.name);
        (void)r;
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
}

}  // namespace castscope::fuzz
