#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "castscope/io.hpp"

namespace castscope::io {

std::string cannot_create(const std::string& path, int err) {
  std::string why = std::strerror(err);
  if (err == ENOENT) {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0)
      why = "its directory '" + path.substr(0, slash) + "' does not exist";
  }
  return "cannot create '" + path + "': " + why;
}

TempFile::TempFile(const std::string& stem)
    : path_((std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string()) {
  const int fd = ::mkstemp(path_.data());
  if (fd < 0) throw Error(cannot_create(path_, errno));
  ::close(fd);
}

TempFile::~TempFile() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write) {
  write_atomically(path, write, path);
}

void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write,
    const std::string& shown) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  // The temporary name means nothing to the user: errors name the file they asked for.
  if (fd < 0) throw Error(cannot_create(shown, errno));
  auto fail = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("writing '" + shown + "' failed: " + why);
  };
  auto put = [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw Error("writing '" + shown + "' failed: " + std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  };
  try {
    write(put);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0) fail(std::strerror(errno));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error("writing '" + shown + "' failed: " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + shown + "': " + why);
  }
}

}  // namespace castscope::io
