#include "core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace expanse {
namespace {

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings)
    pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

child_process_testing::GroupKillObserver group_kill_observer = nullptr;

int DecodeStatus(int raw) {
  if (WIFEXITED(raw))
    return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw))
    return 128 + WTERMSIG(raw);
  return 255;
}

}  // namespace

namespace child_process_testing {
void SetGroupKillObserver(GroupKillObserver observer) { group_kill_observer = observer; }
}  // namespace child_process_testing

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(const ChildProcessOptions& options) {
  if (options.argv.empty())
    return InvalidArgumentError("empty argv");
  const std::string& program = options.argv[0];
  if (access(program.c_str(), F_OK) != 0)
    return NotFoundError(program + ": not found");
  if (access(program.c_str(), X_OK) != 0)
    return PermissionDeniedError(program + ": found but not executable");

  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  if (options.merge_stderr)
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> argv = options.argv;
  auto argv_pointers = Pointers(argv);
  std::vector<std::string> env = options.env.value_or(std::vector<std::string>());
  auto env_pointers = Pointers(env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv_pointers.data(),
                             options.env ? env_pointers.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return InternalError(program + ": spawn failed: " + std::strerror(rc));
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->stdin_fd_ = in[1];
  child->stdout_fd_ = out[0];
  child->kill_grace_ = options.kill_grace;
  fcntl(child->stdout_fd_, F_SETFL, fcntl(child->stdout_fd_, F_GETFL) | O_NONBLOCK);
  fcntl(child->stdin_fd_, F_SETFL, fcntl(child->stdin_fd_, F_GETFL) | O_NONBLOCK);
  return child;
}

ChildProcess::~ChildProcess() {
  if (!TryWait()) {
    kill(-pid_, SIGKILL);
    // One last look, reaping through TryWait (the group is killed again before the leader is
    // reaped); a child the kernel still holds is left to init once we exit.
    for (int i = 0; i < 20 && !TryWait(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CloseStdin();
  if (stdout_fd_ >= 0)
    close(stdout_fd_);
}

bool ChildProcess::WriteLine(std::string_view line) {
  if (stdin_fd_ < 0)
    return false;
  std::string text(line);
  text += '\n';
  size_t written = 0;
  while (written < text.size()) {
    // MSG_NOSIGNAL does not apply to pipes; a closed reader must not kill us with SIGPIPE.
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    const ssize_t n = write(stdin_fd_, text.data() + written, text.size() - written);
    const int error = errno;
    if (n < 0 && error == EPIPE) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_set, nullptr, &zero);  // consume the pending SIGPIPE
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (n < 0 && error == EINTR)
      continue;
    if (n <= 0)
      return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

void ChildProcess::CloseStdin() {
  if (stdin_fd_ >= 0)
    close(stdin_fd_);
  stdin_fd_ = -1;
}

ChildProcess::Lines ChildProcess::ReadLines(std::chrono::milliseconds wait, size_t max_line_bytes,
                                            size_t budget_bytes) {
  Lines result;
  if (stdout_fd_ < 0) {
    result.closed = true;
    return result;
  }
  pollfd ready{stdout_fd_, POLLIN, 0};
  if (poll(&ready, 1, static_cast<int>(wait.count())) <= 0)
    return result;
  char buffer[8192];
  size_t taken = 0;
  while (taken < budget_bytes) {
    const ssize_t n = read(stdout_fd_, buffer, std::min(sizeof(buffer), budget_bytes - taken));
    if (n == 0) {
      result.closed = true;
      break;
    }
    if (n < 0)
      break;  // EAGAIN: all read for now
    taken += static_cast<size_t>(n);
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buffer[i];
      if (c == '\n') {
        if (!skipping_)
          result.lines.push_back(std::move(partial_));
        partial_.clear();
        skipping_ = false;
      } else if (!skipping_) {
        if (partial_.size() >= max_line_bytes) {
          ++result.oversized;
          partial_.clear();
          skipping_ = true;
        } else {
          partial_ += c;
        }
      }
    }
  }
  return result;
}

std::optional<int> ChildProcess::TryWait() {
  if (status_)
    return status_;
  // Whether it has exited, looked at without reaping it (WNOWAIT): until it is reaped, its
  // zombie keeps its pid, and so the id of its process group, from being handed out again.
  siginfo_t info{};
  int rc;
  do {
    rc = waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == ECHILD) {
    // Already reaped by the kernel (the daemon was started with SIGCHLD ignored, which exec
    // keeps): it has ended, its status is lost, and its pid may be another process's now, so
    // it is never signalled again.
    status_ = kStatusLost;
    return status_;
  }
  if (rc != 0 || info.si_pid != pid_)
    return std::nullopt;
  // What it left in its group (a grandchild holding its stdout, a helper's helper) ends with
  // it, here and never later, and before the reaping: while the zombie leader pins the id this
  // reaches only them (or nobody: ESRCH); once it is reaped and the group is empty the id may
  // be reused, and kill(-pid) could hit a stranger's group. SIGKILL at once: the leader is
  // gone, and with it whoever was meant to end them cleanly.
  if (group_kill_observer != nullptr)
    group_kill_observer(pid_);
  kill(-pid_, SIGKILL);
  int raw = 0;
  if (waitpid(pid_, &raw, WNOHANG) == pid_)
    status_ = DecodeStatus(raw);
  return status_;
}

void ChildProcess::Terminate() {
  if (terminated_at_ || TryWait())
    return;
  CloseStdin();
  kill(-pid_, SIGTERM);
  terminated_at_ = std::chrono::steady_clock::now();
}

std::optional<int> ChildProcess::Poll() {
  if (auto status = TryWait())
    return status;
  if (!terminated_at_)
    return std::nullopt;
  if (!killed_ && std::chrono::steady_clock::now() - *terminated_at_ >= kill_grace_) {
    kill(-pid_, SIGKILL);
    killed_ = true;
  }
  return std::nullopt;
}

std::optional<int> ChildProcess::Stop() {
  Terminate();
  const auto deadline = std::chrono::steady_clock::now() + kill_grace_ + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto status = Poll())
      return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

}  // namespace expanse
