// Running the castscope Python package from the CLI (python_child.hpp).
#include "cli/python_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "castscope/error.hpp"

extern char** environ;

namespace castscope::cli {

std::string python_exe() {
  const char* p = std::getenv("CASTSCOPE_PYTHON");
  return p && *p ? p : "python3";
}

// Ctrl+C reaches the whole foreground group: the child handles it, this process only waits.
int run_child(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  struct sigaction ignore {
  }, old_int{}, old_term{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGTERM, &ignore, &old_term);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  int status = 0;
  if (rc == 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void require_python_module(const std::string& py, const std::string& module,
                           const std::string& why) {
  // A missing package would otherwise surface as Python's "No module named" in the middle of
  // the command's output; ask first, quietly, and say how to install it.
  const int probe = run_child({py, "-c", "import " + module}, true);
  if (probe == 0) return;
  throw Error(
      (probe < 0 ? "'" + py + "' cannot be run"
                 : "'" + py + "' cannot import the castscope Python package") +
      "; " + why +
      ". Install it into a virtual environment from the CastScope source tree: python3 -m venv "
      "~/.venvs/castscope && ~/.venvs/castscope/bin/pip install . (plus onnxruntime and onnx "
      "for ONNX models, torch and transformers for Hugging Face directories, llama-cpp-python "
      "for GGUF), then set CASTSCOPE_PYTHON=~/.venvs/castscope/bin/python3 (or run "
      "castscope-cli from that environment)");
}

void run_child_or_exit(const std::vector<std::string>& args, const std::string& py) {
  std::fflush(nullptr);
  const int rc = run_child(args, false);
  if (rc < 0) throw Error("'" + py + "' cannot be run");
  if (rc != 0) {
    std::fflush(nullptr);
    std::exit(rc);
  }
}

}  // namespace castscope::cli
