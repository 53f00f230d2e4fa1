#include "agent/dcgmi_run.h"

namespace expanse::agent {
namespace {

// dcgmi's lines are short; a longer one is not its output and only counts against the limit.
constexpr size_t kMaxLineBytes = 64 * 1024;

}  // namespace

Result<std::unique_ptr<DcgmiRun>> DcgmiRun::Start(std::vector<std::string> argv,
                                                  std::optional<std::vector<std::string>> env,
                                                  int64_t now_ms,
                                                  std::chrono::milliseconds deadline,
                                                  size_t max_output_bytes) {
  ChildProcessOptions options{std::move(argv), std::move(env), std::chrono::milliseconds(1000),
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

std::optional<DcgmiRunResult> DcgmiRun::Poll(int64_t now_ms) {
  // One bounded read per call: a child that never stops printing must not hold the caller.
  if (!closed_ && !result_.timed_out) {
    auto lines = child_->ReadLines(std::chrono::milliseconds(0), kMaxLineBytes);
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
  }
  // More than any dcgmi answer holds: not the output expected, and it may never end.
  if (result_.truncated && !closed_ && !result_.timed_out) {
    result_.timed_out = true;
    child_->Terminate();
  }
  if (!closed_ && !result_.timed_out && now_ms >= deadline_ms_) {
    result_.timed_out = true;
    child_->Terminate();
  }
  if (result_.timed_out) {
    if (!child_->Poll())
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
    child_->Terminate();
    return std::nullopt;
  }
  result_.exit_status = status;
  return result_;
}

}  // namespace expanse::agent
