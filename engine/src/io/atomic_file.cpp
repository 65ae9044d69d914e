#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "castscope/io.hpp"

namespace castscope::io {

void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
  auto fail = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("writing '" + path + "' failed: " + why);
  };
  auto put = [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw Error("writing '" + path + "' failed: " + std::strerror(errno));
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
    throw Error("writing '" + path + "' failed: " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot move '" + tmp + "' to '" + path + "': " + why);
  }
}

}  // namespace castscope::io
