// Test-only: runs a program (a Python interpreter with a script) as a child process whose
// fd 3 is a pipe back to the test, so the script can say when it has reached the point a test
// wants to sample. Header-only; used by the native reader's tests.
#ifndef EXPANSE_PYSTACK_PYTHON_PROCESS_FOR_TEST_H_
#define EXPANSE_PYSTACK_PYTHON_PROCESS_FOR_TEST_H_

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace expanse::pystack::test_util {

// Debian's interpreter: the one the native reader is verified against on every run.
inline constexpr const char* kDebianPython = "/usr/bin/python3.11";

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Stop(); }

  // Starts argv[0] (a path) with stdin from /dev/null and fd 3 writing to our pipe.
  bool Start(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return false;
    }
    // Keep the write end off fd 3 itself: dup2(3, 3) would leave it close-on-exec.
    const int write_fd = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
    close(fds[1]);
    read_fd_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, write_fd, 3);
    std::vector<char*> args;
    for (const std::string& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    const int error = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(write_fd);
    if (error != 0) {
      pid_ = -1;
      return false;
    }
    return WaitForExec(argv[0]);
  }

  // The next line the child wrote to fd 3 (without the newline); nullopt on timeout or when
  // the child closed it. The timeout is generous: a loaded machine starts Python slowly.
  std::optional<std::string> ReadLine(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const std::size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return std::nullopt;
      }
      pollfd poll_fd{read_fd_, POLLIN, 0};
      if (poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char chunk[256];
      const ssize_t got = read(read_fd_, chunk, sizeof(chunk));
      if (got <= 0) {
        return std::nullopt;
      }
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  pid_t pid() const { return pid_; }

  // Waits until the child runs `program`: posix_spawn may return before the exec (ASan's
  // interceptor forks), and a test must not sample the copy of itself. The kernel points
  // /proc/<pid>/exe at the new program before it maps the program's segments (and glibc's
  // vfork lets the parent go on at that same point), so wait for a mapping of it as well:
  // a reader that looks in between sees an executable that is not mapped.
  bool WaitForExec(const std::string& program,
                   std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::error_code error;
    const std::string expected = std::filesystem::canonical(program, error).string();
    const std::string link = "/proc/" + std::to_string(pid_) + "/exe";
    const std::string maps = "/proc/" + std::to_string(pid_) + "/maps";
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::read_symlink(link, error).string() == expected &&
          MapsMention(maps, expected)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  // Whether a line of the maps file at `maps` ends in `path`.
  static bool MapsMention(const std::string& maps, const std::string& path) {
    std::ifstream in(maps);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() > path.size() && line.ends_with(path) &&
          line[line.size() - path.size() - 1] == ' ') {
        return true;
      }
    }
    return false;
  }

  // SIGKILL without reaping: the child stays a zombie until Stop().
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
    }
  }

  // SIGKILL and reap.
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
    if (read_fd_ >= 0) {
      close(read_fd_);
      read_fd_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  std::string buffer_;
};

// The 1-based number of the first line of `script` containing `marker`, or 0.
inline int LineOf(std::string_view script, std::string_view marker) {
  int line = 1;
  std::size_t start = 0;
  while (start < script.size()) {
    const std::size_t end = std::min(script.find('\n', start), script.size());
    if (script.substr(start, end - start).find(marker) != std::string_view::npos) {
      return line;
    }
    ++line;
    start = end + 1;
  }
  return 0;
}

// An interpreter for CPython 3.<minor> on this machine, for the tests that cover the versions
// besides Debian's 3.11: $EXPANSE_TEST_PYTHON3<minor> (e.g. EXPANSE_TEST_PYTHON310), then
// /usr/bin, /usr/local/bin, then pyenv's versions ($PYENV_ROOT, ~/.pyenv, /root/.pyenv).
// Empty when there is none.
inline std::string FindInterpreter(int minor) {
  const std::string name = "python3." + std::to_string(minor);
  const std::string variable = "EXPANSE_TEST_PYTHON3" + std::to_string(minor);
  if (const char* path = std::getenv(variable.c_str()); path != nullptr && *path != '\0') {
    return path;
  }
  std::vector<std::string> candidates = {"/usr/bin/" + name, "/usr/local/bin/" + name};
  std::vector<std::string> roots;
  if (const char* root = std::getenv("PYENV_ROOT"); root != nullptr && *root != '\0') {
    roots.emplace_back(root);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    roots.push_back(std::string(home) + "/.pyenv");
  }
  roots.emplace_back("/root/.pyenv");
  for (const std::string& root : roots) {
    const std::string pattern = root + "/versions/3." + std::to_string(minor) + ".*/bin/" + name;
    glob_t found{};
    if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
      for (std::size_t i = 0; i < found.gl_pathc; ++i) {
        candidates.emplace_back(found.gl_pathv[i]);
      }
    }
    globfree(&found);
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

}  // namespace expanse::pystack::test_util

#endif  // EXPANSE_PYSTACK_PYTHON_PROCESS_FOR_TEST_H_
