// Python stacks of the node's job processes (docs/pystacks.md): a thread of the daemon asks the
// collection policy which processes are due, reads their stacks with the native CPython reader
// (py-spy where configured, or for processes the native reader cannot read), and folds them per
// job into windows that the collector hands on as ingest `stacks` entries.
//
// The main loop publishes the node's jobs (their processes from the job cgroups, and whether
// their GPUs are idle) once per sample; the thread never touches the GPU path, so a slow read
// cannot delay GPU sampling. Job ids are SLURM's numbers, as in the cgroup series: the
// controller renames array tasks and het components before upload.
#ifndef EXPANSE_AGENT_PY_STACKS_H_
#define EXPANSE_AGENT_PY_STACKS_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/capabilities.h"
#include "agent/runtime_settings.h"
#include "core/clock.h"
#include "pystack/collection_policy.h"
#include "pystack/native_reader.h"
#include "pystack/stack_aggregator.h"

namespace expanse::agent {

struct PyStacksOptions {
  std::string hostname;
  RuntimeSettings settings;  // EXPANSE_PYSTACKS_*, EXPANSE_PYSPY
  std::string prefix_bin;    // <shared prefix>/bin, where the bundled py-spy lives; "" = none
  std::string path_env;      // PATH, to find py-spy
  std::function<void(const std::string&)> log;
  std::chrono::milliseconds tick{100};  // the policy wants ticks at the burst rate
};

class PyStacksCollector {
 public:
  PyStacksCollector(PyStacksOptions options, Clock& clock);
  ~PyStacksCollector();
  PyStacksCollector(const PyStacksCollector&) = delete;
  PyStacksCollector& operator=(const PyStacksCollector&) = delete;

  // Starts the sampling thread unless stacks are disabled or no backend is usable.
  void Start();
  void Stop();

  // The node's running jobs now (replaces the previous list).
  void SetJobs(std::vector<pystack::JobProcesses> jobs);
  // One sampling round now, on the caller's thread (tests; the thread does the same per tick).
  void TickOnce();

  // A live burst (docs/pystacks.md, "Live bursts"): the controller found job `job_id` (SLURM's
  // number) stuck or idle and asks every node of it at once. The job is sampled at the burst
  // rate for the burst length from now, whatever its GPUs do, and those samples are folded
  // into one window of their own that starts at `trigger_ms` (the controller's clock, the same
  // on every node), so the stacks of all ranks line up. Refusals: kFailedPrecondition reason
  // "bursts_off" (stacks or bursts disabled, no backend), kNotFound "job_not_here" (no process
  // of the job on this node), kAlreadyExists "in_burst", kResourceExhausted "too_many_bursts"
  // (kMaxLiveBursts at once).
  Status RequestBurst(const std::string& job_id, int64_t trigger_ms);
  static constexpr size_t kMaxLiveBursts = 4;

  // Ingest `stacks` entries of the windows that have closed (`all`: every window, at shutdown).
  std::vector<wire::StackRecord> TakeStacks(bool all);

  // The py_stacks capability: disabled, absent (no usable backend), degraded (with the latest
  // failures, e.g. "py_stacks: ptrace denied for pid 7: ..."), or ok naming the backends.
  Capability Describe() const;
  nlohmann::json Stats() const;

 private:
  void Loop();
  // Reads `pid`'s stacks; `ran_pyspy` tells whether py-spy did (alone or after the native
  // reader), which decides how the read's cost is measured.
  Result<pystack::ProcessStacks> SampleOne(pid_t pid, bool& ran_pyspy);

  PyStacksOptions options_;
  Clock& clock_;
  std::string pyspy_path_;
  std::string pyspy_problem_;  // an unusable EXPANSE_PYSPY
  std::unique_ptr<pystack::NativeReader> native_;
  std::unique_ptr<pystack::StackSource> pyspy_;
  pystack::CollectionPolicy policy_;  // tick thread only

  mutable std::mutex mu_;
  std::vector<pystack::JobProcesses> jobs_;
  bool jobs_changed_ = false;
  std::set<pid_t> known_pids_;
  pystack::StackAggregator aggregator_;
  pystack::PystackHealth health_;
  uint64_t samples_ok_ = 0;
  uint64_t samples_failed_ = 0;
  uint64_t pyspy_fallbacks_ = 0;
  std::map<std::string, uint64_t> failures_by_reason_;
  // Processes found not to be Python, with the executable they had then: a wrapper (a pyenv
  // shim, a launcher script) often exec's into Python under the same pid, which ends its
  // backoff. Tick thread only.
  std::map<pid_t, std::string> not_python_exe_;
  int ticks_ = 0;

  // Live bursts by job: until when (this node's clock) and their own window's stacks.
  struct LiveBurst {
    int64_t trigger_ms = 0;
    int64_t until_ms = 0;
    std::unique_ptr<pystack::StackAggregator> stacks;
    uint64_t samples = 0;  // read into the burst's window
    uint64_t failed = 0;   // reads of the job's processes that failed during the burst
    std::string last_failure;
  };
  std::map<std::string, LiveBurst> live_bursts_;  // under mu_
  std::vector<std::string> burst_requests_;       // for the tick thread's policy; under mu_
  uint64_t live_bursts_started_ = 0;
  uint64_t live_bursts_empty_ = 0;  // ended without one stack: logged with why

  // Counts an empty burst and logs how `burst` of `job_id` went; under mu_.
  void LogBurstEnd(const std::string& job_id, const LiveBurst& burst);

  std::atomic<bool> stop_{false};
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_PY_STACKS_H_
