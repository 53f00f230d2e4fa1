// DcgmiRun: one run-to-end `dcgmi` command (discovery, a health check) that the sampler polls
// instead of waiting on. dcgmi retries an unreachable host engine for 5 s and a wedged engine
// can hold it longer, so the sampler's tick only collects what is already there; past its
// deadline the command is terminated and the run reports that; one that cannot even be reaped
// then is given up on (handed to the caller) rather than waited for.
#ifndef EXPANSE_AGENT_DCGMI_RUN_H_
#define EXPANSE_AGENT_DCGMI_RUN_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/child_process.h"
#include "core/result.h"

namespace expanse::agent {

struct DcgmiRunResult {
  std::optional<int> exit_status;  // unset when it was stopped at its deadline
  bool timed_out = false;
  std::string output;  // stdout and stderr as written, cut at the byte limit
  bool truncated = false;
};

class DcgmiRun {
 public:
  // Starts `argv` with stderr merged into stdout. Fails like ChildProcess::Start.
  static Result<std::unique_ptr<DcgmiRun>> Start(std::vector<std::string> argv,
                                                 std::optional<std::vector<std::string>> env,
                                                 int64_t now_ms, std::chrono::milliseconds deadline,
                                                 size_t max_output_bytes);

  // Reads what is there; the result once the command has ended (or was ended at its deadline
  // and has been reaped, or could not be reaped for a while after SIGKILL). Never blocks. Once
  // dcgmi itself has exited its answer is complete: what it left behind holding its output is
  // killed, not waited for.
  std::optional<DcgmiRunResult> Poll(int64_t now_ms);

  pid_t pid() const { return child_->pid(); }
  // The child unless it has been reaped (still running, or given up on by Poll), for the
  // caller to end and keep polling within its own bound; null once reaped. Once only.
  std::unique_ptr<ChildProcess> TakeUnreaped();

 private:
  DcgmiRun() = default;
  void Read();  // one bounded read into result_
  std::unique_ptr<ChildProcess> child_;
  int64_t deadline_ms_ = 0;
  size_t max_output_bytes_ = 0;
  bool closed_ = false;
  bool read_lines_ = false;  // the last Read got something
  int64_t timed_out_ms_ = 0;
  DcgmiRunResult result_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_DCGMI_RUN_H_
