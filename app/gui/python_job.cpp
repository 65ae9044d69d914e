// Running the castscope Python package as a background job (python_job.hpp).
#include "python_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "castscope/error.hpp"

extern char** environ;

namespace castscope::gui {

std::string python_interpreter() {
  const char* py = std::getenv("CASTSCOPE_PYTHON");
  return py && *py ? py : "python3";
}

std::string run_python_job(JobControl& ctl, std::vector<std::string> args,
                           const std::string& what) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw Error("cannot create pipes for the " + what);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    throw Error("cannot run '" + args[0] + "' for the " + what + " (set CASTSCOPE_PYTHON)");
  }
  std::string stdout_text, stderr_text, line;
  bool sent_int = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (ctl.cancel && !sent_int) {
      kill(pid, SIGINT);
      sent_int = true;
    }
    if (poll(fds, 2, 100) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i == 0) {
        stdout_text.append(buf, static_cast<size_t>(n));
        continue;
      }
      for (ssize_t k = 0; k < n; ++k) {
        if (buf[k] != '\n') {
          line += buf[k];
          continue;
        }
        double f = 0;
        if (std::sscanf(line.c_str(), "progress %lf", &f) == 1)
          ctl.progress = std::min(std::max(f, 0.0), 1.0);
        else
          stderr_text += line + "\n";
        line.clear();
      }
    }
  }
  stderr_text += line;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (ctl.cancel || code == 130) throw Cancelled();
  if (code != 0) {
    if (stderr_text.find("No module named") != std::string::npos)
      throw Error("'" + args[0] +
                  "' cannot import the castscope Python package: install it from the source "
                  "tree with pip install . (and onnxruntime / torch + transformers / "
                  "llama-cpp-python for the model's runtime), or set CASTSCOPE_PYTHON");
    // The message is the child's "error: ..." line; runtime log lines before it are noise here.
    const size_t at = stderr_text.rfind("error: ");
    if (at != std::string::npos) throw Error(stderr_text.substr(at + 7));
    throw Error(stderr_text.empty() ? what + " failed (exit status " + std::to_string(code) + ")"
                                    : stderr_text);
  }
  return stdout_text;
}

}  // namespace castscope::gui
