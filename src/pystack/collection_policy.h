// Which job processes to sample for Python stacks at each tick, and the health line that says
// why sampling fails. Pure logic over an injected clock: the sampler tells it the jobs, how long
// each sample took and which failed; it answers with the processes that are due.
//
//  - Base rate: every job is sampled at base_hz (all of its processes at once).
//  - Bursts: when a job's GPUs go from busy to idle, it is sampled at burst_hz for burst_ms, to
//    catch what the Python code does while the GPUs wait. Edge-triggered (a job idle from its
//    first tick gets no burst), ended early when the GPUs are busy again, and at most one burst
//    starts per job per burst_cooldown_ms.
//  - Requested bursts: RequestBurst (the controller's live detection, through the sampler)
//    samples a job at burst_hz for burst_ms from now whatever its GPUs do, without the
//    cooldown; the caller rate-limits requests. Such a burst is the one moment a stuck job's
//    stacks are asked for, so its first read is due at once even when the window's budget is
//    spent (its cost still counts), and it ends the backoff of the job's processes after
//    failures a retry may cure (a torn read a minute ago must not leave the burst empty).
//  - CPU budget: the sampling cost reported through Record is summed over a sliding window.
//    Rates are scaled down so the expected cost stays under cpu_percent of one core, and while
//    the window's cost is already at the budget nothing is due but a requested burst's first
//    read. The budget can be exceeded by at most the samples of one tick.
//  - Errors: a process whose sample failed is left alone for a while (error_backoff_ms, or
//    lasting_error_backoff_ms for failures that will not change: not Python, an unsupported
//    version, the process gone), and each (pid, reason) is reported once.
#ifndef EXPANSE_PYSTACK_COLLECTION_POLICY_H_
#define EXPANSE_PYSTACK_COLLECTION_POLICY_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace expanse::pystack {

// One running job as attribution sees it now.
struct JobProcesses {
  std::string job_id;
  std::vector<pid_t> pids;
  bool gpu_allocated = false;
  bool gpus_idle = false;  // all of the job's GPUs idle now; ignored without gpu_allocated
};

struct CollectionPolicyOptions {
  double base_hz = 1.0;                       // clamped to [0.1, 10]
  double burst_hz = 10.0;                     // clamped to [base_hz, 10]
  int64_t burst_ms = 20000;                   // 0: no bursts
  int64_t burst_cooldown_ms = 300000;         // from one burst's start to the next
  double cpu_percent = 1.0;                   // of one core
  int64_t budget_window_ms = 60000;           // the sliding window the budget is measured over
  int64_t error_backoff_ms = 60000;           // e.g. ptrace_denied, timeout
  int64_t lasting_error_backoff_ms = 600000;  // not_python, unsupported_version, process_exited
};

struct SampleTarget {
  std::string job_id;
  pid_t pid = 0;
  bool gpu_idle = false;  // the job's GPUs were idle: the aggregator's gpu_idle flag
  bool burst = false;
};

struct CollectionPolicyStats {
  uint64_t targets = 0;            // processes handed out by Due
  uint64_t ticks_over_budget = 0;  // Due calls that returned nothing because of the budget
  uint64_t bursts_started = 0;
  uint64_t bursts_requested = 0;
  uint64_t errors_recorded = 0;
};

// Not thread-safe; the sampler's tick loop owns one.
class CollectionPolicy {
 public:
  // `clock` must outlive the policy.
  CollectionPolicy(CollectionPolicyOptions options, Clock* clock);

  // The processes to sample now. Call it on every tick of the sampler's loop, which should
  // tick at least at burst_hz (every 100 ms for 10 Hz); `jobs` is the full current list, and
  // jobs or pids missing from it are forgotten.
  std::vector<SampleTarget> Due(const std::vector<JobProcesses>& jobs);

  // What one sample of `pid` cost (CPU or wall time of the read, in microseconds), failed or
  // not.
  void Record(pid_t pid, int64_t cost_us);

  // A failed sample: backs the pid off by the error's reason. True the first time this pid
  // failed with this reason (report it then), false for repeats.
  bool RecordError(pid_t pid, const Status& error);

  // How long the caller may wait before the next Due call without sampling late: the burst
  // interval while a job is in a burst, else the base interval. New jobs or GPU states (the
  // start of a burst) come with a new job list, which should wake the caller anyway.
  int64_t TickIntervalMs() const;

  // Samples `job_id` at burst_hz for burst_ms from now, at once, whether its GPUs are idle or
  // busy (a hung collective keeps them busy). A job missing from the next Due's list is
  // forgotten with its request.
  void RequestBurst(const std::string& job_id);

  // Ends the backoff of `pid` (it changed: e.g. a wrapper exec'd into Python).
  void Forget(pid_t pid) { pids_.erase(pid); }

  // The factor the rates are scaled by for the CPU budget, from the last Due (1 = full rate).
  double budget_scale() const { return budget_scale_; }
  // Sampling cost in the current budget window, in microseconds.
  int64_t cost_in_window_us() const { return cost_in_window_us_; }
  const CollectionPolicyStats& stats() const { return stats_; }

 private:
  struct JobState {
    int64_t next_due_ms = 0;
    bool gpu_state_known = false;
    bool gpus_were_idle = false;
    int64_t burst_until_ms = 0;        // in a burst while now < this
    int64_t requested_until_ms = 0;    // ... or while now < this (RequestBurst)
    bool requested_first_due = false;  // RequestBurst's first read not handed out yet
    int64_t last_burst_start_ms = 0;   // meaningful when has_burst
    bool has_burst = false;
  };
  struct PidState {
    int64_t retry_after_ms = 0;
    bool lasting = false;            // the backoff is for a failure that will not change
    std::set<std::string> reported;  // reasons already reported for this pid
  };

  void ForgetMissing(const std::vector<JobProcesses>& jobs);
  void UpdateBurst(const JobProcesses& job, JobState& state, int64_t now_ms);
  void PruneCosts(int64_t now_ms);
  bool BackedOff(pid_t pid, int64_t now_ms) const;
  double RateHz(const JobState& state, int64_t now_ms) const;
  // Hands out the job's processes that are not backed off and sets its next due time.
  void AddTargets(const JobProcesses& job, JobState& state, int64_t now_ms,
                  std::vector<SampleTarget>& due);
  static bool InBurst(const JobState& state, int64_t now_ms) {
    return now_ms < state.burst_until_ms || now_ms < state.requested_until_ms;
  }

  CollectionPolicyOptions options_;
  Clock* clock_;
  std::map<std::string, JobState> jobs_;
  std::map<pid_t, PidState> pids_;
  std::deque<std::pair<int64_t, int64_t>> costs_;  // (time ms, cost us), oldest first
  int64_t cost_in_window_us_ = 0;
  double budget_scale_ = 1.0;
  CollectionPolicyStats stats_;
};

// The latest failure per reason, for the py_stacks capability line, e.g.
// `py_stacks: ptrace denied for pid 1234: Operation not permitted`. A process that exited is
// routine, not a capability problem, and is not recorded.
class PystackHealth {
 public:
  // Failures older than max_age_ms are forgotten.
  explicit PystackHealth(Clock* clock, int64_t max_age_ms = 600000);

  void RecordError(const Status& error);
  void RecordSuccess();

  // One line per reason still fresh, newest first; each starts with "py_stacks: ".
  std::vector<std::string> Problems() const;
  // Problems() joined by "; ", or "" when there are none.
  std::string Summary() const;
  // Unix ms of the last success, 0 when none.
  int64_t last_success_ms() const { return last_success_ms_; }

 private:
  Clock* clock_;
  int64_t max_age_ms_;
  std::map<std::string, std::pair<int64_t, std::string>> latest_;  // reason -> (ms, line)
  int64_t last_success_ms_ = 0;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_COLLECTION_POLICY_H_
