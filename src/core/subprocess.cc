#include "core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace expanse {
namespace {

using SteadyClock = std::chrono::steady_clock;

// strerror() is not thread-safe; the generic category's message is.
std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

Status ErrnoError(std::string_view what, int error) {
  return InternalError(std::string(what) + ": " + ErrnoText(error));
}

// Owns one descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0)
      close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

Status NotFound(const std::string& program) {
  return NotFoundError(program + ": not found").WithReason("not_found");
}

Status NotExecutable(const std::string& program) {
  return PermissionDeniedError(program + ": found but not executable")
      .WithReason("permission_denied");
}

// The path posix_spawn should execute, found the way execvp finds it. Looking it up here
// rather than calling posix_spawnp gives a clean "not found" and honours search_path even
// when the child gets another environment.
Result<std::string> ResolveProgram(const std::string& program,
                                   const std::optional<std::string>& search_path) {
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), F_OK) != 0)
      return NotFound(program);
    return program;
  }
  std::string path_list;
  if (search_path.has_value()) {
    path_list = *search_path;
  } else {
    const char* env_path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only
    path_list = env_path != nullptr ? env_path : "/usr/bin:/bin";
  }
  bool found_unexecutable = false;
  std::string_view rest = path_list;
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) {
      std::string candidate = std::string(dir) + "/" + program;
      struct stat info {};
      if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
        if (access(candidate.c_str(), X_OK) == 0)
          return candidate;
        found_unexecutable = true;
      }
    }
    if (colon == std::string_view::npos)
      break;
    rest.remove_prefix(colon + 1);
  }
  return found_unexecutable ? NotExecutable(program) : NotFound(program);
}

// True once `pid` has exited, without reaping it: the zombie keeps its pid, and so the
// process group id, reserved, which makes a later kill(-pid) safe from pid reuse.
bool HasExited(pid_t pid) {
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != EINTR)
      return true;  // ECHILD: nothing left to wait for
  }
  return info.si_pid == pid;
}

// Waits until `pid` exits or `deadline` passes; returns whether it exited. Polls, because a
// SIGCHLD handler or pidfd would reach beyond this function (pidfd_open also needs Linux 5.3,
// newer than some cluster kernels); the wait is short in practice: a program closes its pipes
// as it exits, and after a timeout it is bounded by kill_grace.
bool WaitForExit(pid_t pid, SteadyClock::time_point deadline) {
  auto pause = std::chrono::microseconds(100);
  while (!HasExited(pid)) {
    const auto now = SteadyClock::now();
    if (now >= deadline)
      return false;
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(pause, deadline - now));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  return true;
}

// Reaps `pid`; returns its wait status, or nullopt when it was not ours to reap (see the
// header: SIGCHLD ignored, or reaped elsewhere).
std::optional<int> Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return std::nullopt;
  }
  return status;
}

// Kills `pid`'s process group: SIGTERM, then SIGKILL once the leader has exited or `grace`
// has passed. SIGKILL goes out either way, for children that outlive the leader.
void KillGroup(pid_t pid, std::chrono::milliseconds grace) {
  kill(-pid, SIGTERM);
  WaitForExit(pid, SteadyClock::now() + grace);
  kill(-pid, SIGKILL);
}

struct Stream {
  Fd fd;
  std::string* text = nullptr;
  bool* truncated = nullptr;
};

// Reads what is ready on `stream`, keeping at most `cap` bytes; closes it at end of file.
void Drain(Stream& stream, size_t cap) {
  std::array<char, 16384> buffer{};
  const ssize_t n = read(stream.fd.get(), buffer.data(), buffer.size());
  if (n < 0) {
    if (errno != EINTR && errno != EAGAIN)
      stream.fd.Reset();  // a broken pipe reads as end of output
    return;
  }
  if (n == 0) {
    stream.fd.Reset();
    return;
  }
  const size_t room = cap - std::min(cap, stream.text->size());
  const size_t keep = std::min(room, static_cast<size_t>(n));
  stream.text->append(buffer.data(), keep);
  if (keep < static_cast<size_t>(n))
    *stream.truncated = true;
}

// Reads both streams until both reach end of file or `deadline` passes. Returns false on
// timeout; a poll failure other than EINTR is returned as a status.
Result<bool> ReadUntil(std::array<Stream, 2>& streams, SteadyClock::time_point deadline,
                       size_t cap) {
  while (streams[0].fd.is_open() || streams[1].fd.is_open()) {
    const auto remaining =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (remaining.count() <= 0)
      return false;
    std::array<pollfd, 2> fds{};
    std::array<Stream*, 2> polled{};
    nfds_t count = 0;
    for (Stream& stream : streams) {
      if (stream.fd.is_open()) {
        fds[count] = {.fd = stream.fd.get(), .events = POLLIN, .revents = 0};
        polled[count++] = &stream;
      }
    }
    const int timeout_ms = static_cast<int>(std::min<int64_t>(remaining.count(), 1 << 30));
    if (poll(fds.data(), count, timeout_ms) < 0) {
      if (errno == EINTR)
        continue;
      return ErrnoError("poll on the program's output", errno);
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents != 0)
        Drain(*polled[i], cap);
    }
  }
  return true;
}

// posix_spawn's attributes and file actions, destroyed on scope exit.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }

  // stdin from /dev/null, stdout and stderr to the pipes, nothing else inherited; a process
  // group of its own; default signal dispositions and an empty mask, whatever ours are (a
  // daemon ignores SIGPIPE, which the program must not inherit).
  int Configure(int stdout_fd, int stderr_fd) {
    int rc = posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&actions_, stdout_fd, 1);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&actions_, stderr_fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    // Our own descriptors are close-on-exec; this also catches a library's that are not.
    if (rc == 0)
      rc = posix_spawn_file_actions_addclosefrom_np(&actions_, 3);
#endif
    sigset_t empty;
    sigset_t all;
    sigemptyset(&empty);
    sigfillset(&all);
    if (rc == 0)
      rc = posix_spawnattr_setflags(
          &attr_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
      rc = posix_spawnattr_setpgroup(&attr_, 0);
    if (rc == 0)
      rc = posix_spawnattr_setsigmask(&attr_, &empty);
    if (rc == 0)
      rc = posix_spawnattr_setsigdefault(&attr_, &all);
    return rc;
  }

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_{};
  posix_spawnattr_t attr_{};
};

// NULL-terminated char* views of `strings`, which must outlive the result.
std::vector<char*> CStringArray(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty())
    return InvalidArgumentError("RunSubprocess: empty argv");
  const std::string& program = options.argv[0];
  EXPANSE_ASSIGN_OR_RETURN(const std::string path, ResolveProgram(program, options.search_path));

  std::array<int, 2> out_pipe{};
  std::array<int, 2> err_pipe{};
  if (pipe2(out_pipe.data(), O_CLOEXEC) != 0)
    return ErrnoError("pipe", errno);
  Fd out_read(out_pipe[0]);
  Fd out_write(out_pipe[1]);
  if (pipe2(err_pipe.data(), O_CLOEXEC) != 0)
    return ErrnoError("pipe", errno);
  Fd err_read(err_pipe[0]);
  Fd err_write(err_pipe[1]);

  SpawnSetup setup;
  if (const int rc = setup.Configure(out_write.get(), err_write.get()); rc != 0)
    return ErrnoError("posix_spawn setup", rc);
  std::vector<std::string> argv_copy = options.argv;
  std::vector<char*> argv = CStringArray(argv_copy);
  std::vector<std::string> env_copy = options.env.value_or(std::vector<std::string>{});
  std::vector<char*> env = CStringArray(env_copy);

  pid_t pid = 0;
  const SteadyClock::time_point start = SteadyClock::now();
  const int rc = posix_spawn(&pid, path.c_str(), setup.actions(), setup.attr(), argv.data(),
                             options.env.has_value() ? env.data() : environ);
  if (rc == ENOENT)
    return NotFound(program);
  if (rc == EACCES)
    return NotExecutable(program);
  if (rc != 0)
    return ErrnoError(program + ": cannot run", rc);
  // Only the child may hold the write ends, or we would never see end of file.
  out_write.Reset();
  err_write.Reset();

  SubprocessResult result;
  std::array<Stream, 2> streams{
      Stream{std::move(out_read), &result.stdout_text, &result.stdout_truncated},
      Stream{std::move(err_read), &result.stderr_text, &result.stderr_truncated}};
  // Clamped so that a "forever" timeout cannot overflow the clock's arithmetic.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  const SteadyClock::time_point deadline =
      start + std::clamp(options.timeout, std::chrono::milliseconds(0), kLongest);
  Result<bool> finished = ReadUntil(streams, deadline, options.max_output_bytes);
  if (!finished.ok()) {
    KillGroup(pid, std::chrono::milliseconds(0));
    Reap(pid);
    return std::move(finished).status();
  }
  // End of output usually means the program is exiting; it may also have closed its stdout
  // early, so the wait for its exit is bounded by the same deadline.
  result.timed_out = !*finished || !WaitForExit(pid, deadline);
  if (result.timed_out)
    KillGroup(pid, std::clamp(options.kill_grace, std::chrono::milliseconds(0), kLongest));
  const std::optional<int> reaped = Reap(pid);
  if (!reaped.has_value())
    return InternalError(program +
                         ": its exit status was taken by another waiter (is SIGCHLD "
                         "ignored?)");
  const int status = *reaped;
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    result.term_signal = WTERMSIG(status);
  return result;
}

}  // namespace expanse
