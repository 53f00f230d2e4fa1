#include "agent/dcgmi_run.h"

namespace expanse::agent {
namespace {

// dcgmi's lines are short; a longer one is not its output and only counts against the limit.
constexpr size_t kMaxLineBytes = 64 * 1024;
// Past the deadline: the kill grace ChildProcess waits before SIGKILL, then this long for the
// kernel to let the child go before the run is given up on (a dcgmi stuck in an uninterruptible
// call is not ended by any signal).
constexpr std::chrono::milliseconds kKillGrace{1000};
constexpr int64_t kReapWaitMs = 2'000;
// One ChildProcess::ReadLines call's byte budget, to bound the drain below.
constexpr size_t kReadBudget = 256 * 1024;

}  // namespace

Result<std::unique_ptr<DcgmiRun>> DcgmiRun::Start(std::vector<std::string> argv,
                                                  std::optional<std::vector<std::string>> env,
                                                  int64_t now_ms,
                                                  std::chrono::milliseconds deadline,
                                                  size_t max_output_bytes) {
  ChildProcessOptions options{std::move(argv), std::move(env), kKillGrace,
                              /*merge_stderr=*/true};
  auto child = ChildProcess::Start(options);
  if (!child.ok())
    return child.status();
  std::unique_ptr<DcgmiRun> run(new DcgmiRun());
  run->child_ = std::move(*child);
  run->child_->CloseStdin();  // dcgmi reads nothing; a prompt must see end of input, not hang
  run->deadline_ms_ = now_ms + deadline.count();
  run->max_output_bytes_ = max_output_bytes;
  return run;
}

void DcgmiRun::Read() {
  auto lines = child_->ReadLines(std::chrono::milliseconds(0), kMaxLineBytes, kReadBudget);
  for (const std::string& line : lines.lines) {
    if (result_.output.size() + line.size() + 1 > max_output_bytes_) {
      result_.truncated = true;
      continue;
    }
    result_.output += line;
    result_.output += '\n';
  }
  if (lines.oversized > 0)
    result_.truncated = true;
  closed_ = lines.closed;
  read_lines_ = !lines.lines.empty() || lines.oversized > 0;
}

std::optional<DcgmiRunResult> DcgmiRun::Poll(int64_t now_ms) {
  if (!closed_ && !result_.timed_out) {
    // Reaped first, read after: whatever dcgmi wrote before it exited is in the pipe by then.
    // Reaping also kills what it left in its process group (ChildProcess::TryWait).
    const std::optional<int> exited = child_->TryWait();
    // One bounded read per call: a child that never stops printing must not hold the caller.
    Read();
    if (exited && !closed_) {
      // dcgmi is gone but something still holds its output open (a process it started that
      // left its group, or one the kernel holds): its answer is complete once the pipe is
      // drained, which is bounded by the output limit; nothing written after it is its answer.
      for (size_t i = 0; !closed_ && read_lines_ && i <= max_output_bytes_ / kReadBudget + 1; ++i)
        Read();
      closed_ = true;
    }
  }
  // More than any dcgmi answer holds: not the output expected, and it may never end.
  if (result_.truncated && !closed_ && !result_.timed_out) {
    result_.timed_out = true;
    timed_out_ms_ = now_ms;
    child_->Terminate();
  }
  if (!closed_ && !result_.timed_out && now_ms >= deadline_ms_) {
    result_.timed_out = true;
    timed_out_ms_ = now_ms;
    child_->Terminate();
  }
  if (result_.timed_out) {
    if (child_->Poll())
      return result_;
    // Not reapable yet: given up on once the kill grace and a wait after SIGKILL have passed,
    // so that one wedged dcgmi does not stop every later check; the caller keeps the child
    // (TakeUnreaped) to reap it should the kernel ever let it go.
    if (now_ms - timed_out_ms_ < kKillGrace.count() + kReapWaitMs)
      return std::nullopt;
    return result_;
  }
  if (!closed_)
    return std::nullopt;
  // Output closed: it has exited or is about to; reap it without waiting.
  std::optional<int> status = child_->TryWait();
  if (!status) {
    if (now_ms < deadline_ms_)
      return std::nullopt;
    result_.timed_out = true;
    timed_out_ms_ = now_ms;
    child_->Terminate();
    return std::nullopt;
  }
  result_.exit_status = status;
  return result_;
}

std::unique_ptr<ChildProcess> DcgmiRun::TakeUnreaped() {
  if (!child_ || child_->TryWait())
    return nullptr;
  return std::move(child_);
}

}  // namespace expanse::agent
