#include "agent/py_stacks.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "pystack/pyspy_source.h"

namespace expanse::agent {

namespace {

pystack::CollectionPolicyOptions PolicyOptions(const RuntimeSettings& s) {
  pystack::CollectionPolicyOptions o;
  o.base_hz = s.pystacks_hz;
  o.burst_hz = s.pystacks_burst_hz;
  o.burst_ms = int64_t{s.pystacks_burst_seconds} * 1000;
  o.cpu_percent = s.pystacks_cpu_percent;
  return o;
}

pystack::StackAggregatorOptions AggregatorOptions(const RuntimeSettings& s) {
  pystack::StackAggregatorOptions o;
  o.window_ms = int64_t{s.pystacks_window_seconds} * 1000;
  return o;
}

// Failures py-spy may read better than the native reader: a version or build it does not
// know. Permissions and vanished processes are the same for both.
bool WorthPyspy(const Status& s) {
  const std::string& r = s.reason();
  return r == "unsupported_version" || r == "bad_debug_offsets" || r == "binary_unavailable" ||
         r == "inconsistent_read" || r == "unreadable_address" || r == "read_budget_exceeded";
}

// The calling thread's CPU time in microseconds, -1 if unknown. A native read runs on this
// thread (its /proc reads and process_vm_readv included), so this is what it cost the node,
// however long a busy node kept the thread waiting for a core.
int64_t ThreadCpuMicros() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return -1;
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

std::string ExecutableOf(pid_t pid) {
  char target[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), target, sizeof(target));
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

}  // namespace

PyStacksCollector::PyStacksCollector(PyStacksOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      policy_(PolicyOptions(options_.settings), &clock_),
      aggregator_(AggregatorOptions(options_.settings)),
      health_(&clock_) {
  const std::string& backend = options_.settings.pystacks_backend;
  if (backend != "py-spy")
    native_ = std::make_unique<pystack::NativeReader>();
  if (backend != "native") {
    Result<std::string> found =
        pystack::FindPyspy(options_.settings.pyspy, options_.prefix_bin,
                           options_.path_env.empty() ? nullptr : options_.path_env.c_str());
    if (!found.ok()) {
      pyspy_problem_ = found.status().message();
    } else if (!found->empty()) {
      pyspy_path_ = *found;
      pystack::PyspyOptions py;
      py.binary = pyspy_path_;
      pyspy_ = std::make_unique<pystack::PyspySource>(py);
    }
  }
}

PyStacksCollector::~PyStacksCollector() { Stop(); }

void PyStacksCollector::Start() {
  if (!options_.settings.pystacks_enable || (!native_ && !pyspy_) || thread_.joinable())
    return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void PyStacksCollector::Stop() {
  stop_ = true;
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void PyStacksCollector::SetJobs(std::vector<pystack::JobProcesses> jobs) {
  {
    std::lock_guard lock(mu_);
    jobs_ = std::move(jobs);
    jobs_changed_ = true;
  }
  wake_.notify_all();  // a job's GPUs may have gone idle: a burst starts at the next tick
}

Status PyStacksCollector::RequestBurst(const std::string& job_id, int64_t trigger_ms) {
  const int64_t window_ms = int64_t{options_.settings.pystacks_burst_seconds} * 1000;
  if (!options_.settings.pystacks_enable || (!native_ && !pyspy_) || window_ms <= 0) {
    return FailedPreconditionError("Python stacks or their bursts are off on this node")
        .WithReason("bursts_off");
  }
  {
    std::lock_guard lock(mu_);
    const bool here = std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& j) {
      return j.job_id == job_id && !j.pids.empty();
    });
    if (!here)
      return NotFoundError("no process of job " + job_id + " here").WithReason("job_not_here");
    if (live_bursts_.contains(job_id))
      return AlreadyExistsError("job " + job_id + " is in a burst").WithReason("in_burst");
    if (live_bursts_.size() >= kMaxLiveBursts) {
      return ResourceExhaustedError("already " + std::to_string(kMaxLiveBursts) +
                                    " live bursts on this node")
          .WithReason("too_many_bursts");
    }
    pystack::StackAggregatorOptions window = AggregatorOptions(options_.settings);
    window.window_ms = window_ms;
    window.window_origin_ms = trigger_ms;
    LiveBurst& burst = live_bursts_[job_id];
    burst.trigger_ms = trigger_ms;
    burst.until_ms = clock_.NowMs() + window_ms;
    burst.stacks = std::make_unique<pystack::StackAggregator>(window);
    burst_requests_.push_back(job_id);
    ++live_bursts_started_;
    jobs_changed_ = true;
  }
  wake_.notify_all();  // the first sample now, not at the next base-rate tick
  return OkStatus();
}

void PyStacksCollector::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    jobs_changed_ = false;
    lock.unlock();
    TickOnce();
    // Between bursts nothing is due more often than the base rate, so the thread sleeps that
    // long (a wake-up costs tens of microseconds on a busy VM) unless new jobs arrive.
    const auto wait = std::max<std::chrono::milliseconds>(
        options_.tick, std::chrono::milliseconds(policy_.TickIntervalMs()));
    lock.lock();
    wake_.wait_for(lock, wait, [this] { return stop_.load() || jobs_changed_; });
  }
}

Result<pystack::ProcessStacks> PyStacksCollector::SampleOne(pid_t pid, bool& ran_pyspy) {
  ran_pyspy = !native_;
  if (!native_)
    return pyspy_->Sample(pid);
  Result<pystack::ProcessStacks> stacks = native_->Sample(pid);
  if (!stacks.ok() && pyspy_ && WorthPyspy(stacks.status())) {
    std::lock_guard lock(mu_);
    ++pyspy_fallbacks_;
  } else {
    return stacks;
  }
  ran_pyspy = true;
  return pyspy_->Sample(pid);
}

void PyStacksCollector::TickOnce() {
  std::vector<pystack::JobProcesses> jobs;
  std::vector<std::string> requested;
  {
    std::lock_guard lock(mu_);
    jobs = jobs_;
    requested.swap(burst_requests_);
  }
  for (const std::string& job : requested)
    policy_.RequestBurst(job);
  // Processes that left every job: drop what the reader cached for them.
  std::set<pid_t> now_pids;
  for (const auto& j : jobs)
    now_pids.insert(j.pids.begin(), j.pids.end());
  if (native_) {
    for (pid_t pid : known_pids_) {
      if (!now_pids.count(pid))
        native_->Forget(pid);
    }
  }
  known_pids_ = std::move(now_pids);
  if (++ticks_ % 10 == 0) {  // about once a second
    for (auto it = not_python_exe_.begin(); it != not_python_exe_.end();) {
      if (!known_pids_.count(it->first)) {
        it = not_python_exe_.erase(it);
      } else if (ExecutableOf(it->first) != it->second) {
        policy_.Forget(it->first);
        it = not_python_exe_.erase(it);
      } else {
        ++it;
      }
    }
  }

  for (const pystack::SampleTarget& target : policy_.Due(jobs)) {
    const auto started = std::chrono::steady_clock::now();
    const int64_t cpu_started = ThreadCpuMicros();
    bool ran_pyspy = false;
    Result<pystack::ProcessStacks> stacks = SampleOne(target.pid, ran_pyspy);
    const int64_t wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count();
    const int64_t cpu_ended = cpu_started < 0 ? -1 : ThreadCpuMicros();
    // py-spy works in a process of its own: the wall time of its run stands for its CPU.
    policy_.Record(target.pid, ran_pyspy || cpu_ended < 0 ? wall_us : cpu_ended - cpu_started);
    std::lock_guard lock(mu_);
    if (stacks.ok()) {
      ++samples_ok_;
      health_.RecordSuccess();
      const int64_t now_ms = clock_.NowMs();
      auto live = live_bursts_.find(target.job_id);
      if (live != live_bursts_.end() && now_ms < live->second.until_ms) {
        // Into the burst's own window, whatever this node's clock says of the trigger time.
        const int64_t window_ms = int64_t{options_.settings.pystacks_burst_seconds} * 1000;
        const int64_t at =
            std::clamp(now_ms, live->second.trigger_ms, live->second.trigger_ms + window_ms - 1);
        live->second.stacks->Add(target.job_id, options_.hostname, at, *stacks, target.gpu_idle);
        ++live->second.samples;
      } else {
        aggregator_.Add(target.job_id, options_.hostname, now_ms, *stacks, target.gpu_idle);
      }
      continue;
    }
    ++samples_failed_;
    if (auto live = live_bursts_.find(target.job_id); live != live_bursts_.end()) {
      ++live->second.failed;
      live->second.last_failure = stacks.status().message().substr(0, 200);
    }
    if (failures_by_reason_.size() < 64)
      ++failures_by_reason_[stacks.status().reason()];
    // Most jobs run shells and launchers beside their Python: not a problem of the collector.
    if (stacks.status().reason() != "not_python")
      health_.RecordError(stacks.status());
    else if (not_python_exe_.size() < 100'000)
      not_python_exe_[target.pid] = ExecutableOf(target.pid);
    if (policy_.RecordError(target.pid, stacks.status()) && options_.log &&
        stacks.status().reason() != "not_python" && stacks.status().reason() != "process_exited") {
      options_.log(stacks.status().message());
    }
  }
}

std::vector<wire::StackRecord> PyStacksCollector::TakeStacks(bool all) {
  std::lock_guard lock(mu_);
  const int64_t now_ms = clock_.NowMs();
  std::vector<wire::StackRecord> out = all ? aggregator_.TakeAll() : aggregator_.TakeClosed(now_ms);
  for (auto it = live_bursts_.begin(); it != live_bursts_.end();) {
    if (!all && now_ms < it->second.until_ms) {
      ++it;
      continue;
    }
    std::vector<wire::StackRecord> burst = it->second.stacks->TakeAll();
    LogBurstEnd(it->first, it->second);
    out.insert(out.end(), std::make_move_iterator(burst.begin()),
               std::make_move_iterator(burst.end()));
    it = live_bursts_.erase(it);
  }
  return out;
}

void PyStacksCollector::LogBurstEnd(const std::string& job_id, const LiveBurst& burst) {
  // The one line that tells an operator why a stuck job's burst brought no stacks from a node.
  if (burst.samples == 0)
    ++live_bursts_empty_;
  if (!options_.log)
    return;
  std::string line =
      "stack burst for job " + job_id + " ended: " + std::to_string(burst.samples) + " sample(s)";
  if (burst.failed > 0)
    line +=
        ", " + std::to_string(burst.failed) + " failed read(s), the last: " + burst.last_failure;
  else if (burst.samples == 0)
    line += " (no read was made in it)";
  options_.log(line);
}

Capability PyStacksCollector::Describe() const {
  if (!options_.settings.pystacks_enable)
    return {"disabled", "EXPANSE_PYSTACKS_ENABLE=0"};
  if (!native_ && !pyspy_) {
    return {"absent", pyspy_problem_.empty()
                          ? "EXPANSE_PYSTACKS_BACKEND=py-spy but no py-spy was found (bundled "
                            "copy, EXPANSE_PYSPY or PATH)"
                          : pyspy_problem_};
  }
  std::string backends = native_ ? "native CPython reader" : "";
  if (pyspy_)
    backends += (backends.empty() ? "py-spy at " : ", py-spy at ") + pyspy_path_;
  std::lock_guard lock(mu_);
  const std::string problems = health_.Summary();
  if (!problems.empty())
    return {"degraded", problems};
  if (!pyspy_problem_.empty())
    return {"degraded", backends + "; " + pyspy_problem_};
  return {"ok", backends};
}

nlohmann::json PyStacksCollector::Stats() const {
  std::lock_guard lock(mu_);
  const pystack::StackAggregatorStats& a = aggregator_.stats();
  return {{"samples_ok", samples_ok_},
          {"samples_failed", samples_failed_},
          {"pyspy_fallbacks", pyspy_fallbacks_},
          {"failures_by_reason", failures_by_reason_},
          {"threads_counted", a.threads_counted},
          {"threads_dropped_late", a.threads_dropped_late},
          {"windows_discarded", a.windows_discarded},
          {"live_bursts", live_bursts_started_},
          {"live_bursts_empty", live_bursts_empty_},
          {"bytes_held", aggregator_.bytes_held()}};
}

}  // namespace expanse::agent
