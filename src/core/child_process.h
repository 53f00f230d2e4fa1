// ChildProcess: a long-lived helper program the daemon talks to over pipes, line by line
// (expanse-cupti-helper, a streaming `dcgmi dmon`), as opposed to RunSubprocess's run-to-end.
//
// The child gets pipes for stdin and stdout, inherits stderr (its complaints reach the
// service's journal) unless told to merge it into stdout, runs in a process group of its own and
// inherits no other descriptor. Lines it writes are hostile input to the reader: a line longer than
// the caller's bound is cut and counted, and one read takes at most a byte budget, so a child that
// writes without pause is slowed down by its pipe rather than holding the reader. Writes to it
// never block: a child that stops reading loses lines (WriteLine says so). Ending it never blocks
// either: Terminate sends SIGTERM, Poll reaps it or sends SIGKILL after the grace period; a child
// stuck in the kernel (an uninterruptible driver call) cannot hold its parent. The destructor kills
// what is left and reaps it if it can. Whatever the child leaves in its process group is killed
// when the child is reaped (TryWait, Poll, Stop, the destructor), just before, while its zombie
// still keeps the group's id from reuse: a wrapper that exits while its own child holds the
// output pipe must not leave that child running.
#ifndef EXPANSE_CORE_CHILD_PROCESS_H_
#define EXPANSE_CORE_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse {

struct ChildProcessOptions {
  std::vector<std::string> argv;  // argv[0] must be a path
  // "NAME=value" entries replacing the child's environment; unset inherits ours.
  std::optional<std::vector<std::string>> env;
  std::chrono::milliseconds kill_grace{1000};
  // Send the child's stderr into the same pipe as its stdout, for a program that reports some
  // failures on one stream and some on the other (dcgmi); otherwise stderr is inherited.
  bool merge_stderr = false;
};

class ChildProcess {
 public:
  // Fails with kNotFound / kPermissionDenied for a missing or non-executable program.
  static Result<std::unique_ptr<ChildProcess>> Start(const ChildProcessOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Writes `line` and a newline to the child's stdin; false when the child no longer reads or
  // its pipe is full (the line is then not written).
  bool WriteLine(std::string_view line);
  // Closes the child's stdin (it sees end of input).
  void CloseStdin();

  struct Lines {
    std::vector<std::string> lines;  // complete lines, newline removed
    size_t oversized = 0;            // lines longer than the bound, dropped
    bool closed = false;             // the child closed its stdout (it exited, usually)
  };
  // Waits up to `wait` for output, then returns the complete lines read so far, reading at most
  // `budget_bytes`; the rest stays in the pipe for the next call.
  Lines ReadLines(std::chrono::milliseconds wait, size_t max_line_bytes,
                  size_t budget_bytes = 256 * 1024);

  // The exit status once the child has ended (128 + signal for a signal), reaping it and
  // killing what is left in its process group; nullopt while it runs.
  std::optional<int> TryWait();
  // TryWait's status for a child that something else reaped (SIGCHLD ignored): it has ended,
  // how is unknown.
  static constexpr int kStatusLost = 255;
  // SIGTERM to its process group, without waiting. Poll finishes the job.
  void Terminate();
  // After Terminate: reaps the child once it has exited, or sends SIGKILL to its group when the
  // grace period has passed. Returns the status once reaped; never blocks.
  std::optional<int> Poll();
  // Terminate, then Poll until reaped or until the grace period and a short wait after SIGKILL
  // have passed (tests and clean shutdowns); nullopt when the child could not be reaped.
  std::optional<int> Stop();

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string partial_;
  bool skipping_ = false;  // inside an oversized line, dropping bytes to its newline
  std::optional<int> status_;
  std::chrono::milliseconds kill_grace_{1000};
  std::optional<std::chrono::steady_clock::time_point> terminated_at_;
  bool killed_ = false;
};

namespace child_process_testing {
// Called with the leader's pid just before its process group is sent SIGKILL on reaping, so a
// test can check the leader is still an unreaped zombie then (its pid, and with it the group's
// id, cannot have been handed to another process). nullptr: none.
using GroupKillObserver = void (*)(pid_t leader);
void SetGroupKillObserver(GroupKillObserver observer);
}  // namespace child_process_testing

}  // namespace expanse

#endif  // EXPANSE_CORE_CHILD_PROCESS_H_
