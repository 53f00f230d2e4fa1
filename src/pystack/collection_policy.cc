#include "pystack/collection_policy.h"

#include <algorithm>

namespace expanse::pystack {
namespace {

constexpr double kMinHz = 0.1;
constexpr double kMaxHz = 10.0;

// Failures that retrying soon will not change.
bool IsLasting(const std::string& reason) {
  return reason == "not_python" || reason == "unsupported_version" || reason == "process_exited";
}

}  // namespace

CollectionPolicy::CollectionPolicy(CollectionPolicyOptions options, Clock* clock)
    : options_(options), clock_(clock) {
  // The settings layer refuses values outside these ranges; clamping here keeps a bad caller
  // from dividing by zero or sampling a job hundreds of times a second.
  options_.base_hz = std::clamp(options_.base_hz, kMinHz, kMaxHz);
  options_.burst_hz = std::clamp(options_.burst_hz, options_.base_hz, kMaxHz);
  options_.burst_ms = std::max<int64_t>(options_.burst_ms, 0);
  options_.budget_window_ms = std::max<int64_t>(options_.budget_window_ms, 1000);
  options_.cpu_percent = std::max(options_.cpu_percent, 0.0);
}

void CollectionPolicy::ForgetMissing(const std::vector<JobProcesses>& jobs) {
  std::set<std::string> job_ids;
  std::set<pid_t> pids;
  for (const JobProcesses& job : jobs) {
    job_ids.insert(job.job_id);
    pids.insert(job.pids.begin(), job.pids.end());
  }
  std::erase_if(jobs_, [&](const auto& entry) { return !job_ids.contains(entry.first); });
  // A pid that left (and may come back as another process) starts with a clean slate.
  std::erase_if(pids_, [&](const auto& entry) { return !pids.contains(entry.first); });
}

void CollectionPolicy::UpdateBurst(const JobProcesses& job, JobState& state, int64_t now_ms) {
  if (!job.gpu_allocated) {
    state.gpu_state_known = false;
    state.burst_until_ms = 0;
    return;
  }
  const bool went_idle = state.gpu_state_known && !state.gpus_were_idle && job.gpus_idle;
  const bool cooled_down =
      !state.has_burst || now_ms - state.last_burst_start_ms >= options_.burst_cooldown_ms;
  if (went_idle && cooled_down && options_.burst_ms > 0) {
    state.burst_until_ms = now_ms + options_.burst_ms;
    state.last_burst_start_ms = now_ms;
    state.has_burst = true;
    state.next_due_ms = now_ms;  // the first moments of idleness are the telling ones
    ++stats_.bursts_started;
  }
  if (!job.gpus_idle)
    state.burst_until_ms = 0;
  state.gpu_state_known = true;
  state.gpus_were_idle = job.gpus_idle;
}

void CollectionPolicy::RequestBurst(const std::string& job_id) {
  const int64_t now_ms = clock_->NowMs();
  JobState& state = jobs_[job_id];
  state.requested_until_ms = now_ms + std::max<int64_t>(options_.burst_ms, 1);
  state.next_due_ms = now_ms;
  state.requested_first_due = true;
  ++stats_.bursts_requested;
}

void CollectionPolicy::PruneCosts(int64_t now_ms) {
  while (!costs_.empty() && costs_.front().first <= now_ms - options_.budget_window_ms) {
    cost_in_window_us_ -= costs_.front().second;
    costs_.pop_front();
  }
}

bool CollectionPolicy::BackedOff(pid_t pid, int64_t now_ms) const {
  const auto it = pids_.find(pid);
  return it != pids_.end() && now_ms < it->second.retry_after_ms;
}

double CollectionPolicy::RateHz(const JobState& state, int64_t now_ms) const {
  return InBurst(state, now_ms) ? options_.burst_hz : options_.base_hz;
}

std::vector<SampleTarget> CollectionPolicy::Due(const std::vector<JobProcesses>& jobs) {
  const int64_t now = clock_->NowMs();
  ForgetMissing(jobs);
  PruneCosts(now);

  // Samples per second wanted at full rate, for the budget's scale.
  double wanted_per_second = 0;
  bool any_due = false;
  for (const JobProcesses& job : jobs) {
    JobState& state = jobs_[job.job_id];
    UpdateBurst(job, state, now);
    const auto sampleable = std::count_if(job.pids.begin(), job.pids.end(),
                                          [&](pid_t pid) { return !BackedOff(pid, now); });
    wanted_per_second += RateHz(state, now) * static_cast<double>(sampleable);
    any_due = any_due || (sampleable > 0 && state.next_due_ms <= now);
  }

  const double budget_us_per_second = options_.cpu_percent / 100.0 * 1e6;
  budget_scale_ = 1.0;
  if (!costs_.empty() && wanted_per_second > 0) {
    const double mean_cost_us =
        static_cast<double>(cost_in_window_us_) / static_cast<double>(costs_.size());
    const double expected_us_per_second = mean_cost_us * wanted_per_second;
    if (expected_us_per_second > budget_us_per_second)
      budget_scale_ = budget_us_per_second / expected_us_per_second;
  }
  const double budget_in_window_us =
      budget_us_per_second * static_cast<double>(options_.budget_window_ms) / 1000.0;
  const bool over_budget = static_cast<double>(cost_in_window_us_) >= budget_in_window_us;

  std::vector<SampleTarget> due;
  for (const JobProcesses& job : jobs) {
    JobState& state = jobs_[job.job_id];
    if (state.next_due_ms > now || (over_budget && !state.requested_first_due))
      continue;
    AddTargets(job, state, now, due);
  }
  if (over_budget && any_due && due.empty())
    ++stats_.ticks_over_budget;
  stats_.targets += due.size();
  return due;
}

void CollectionPolicy::AddTargets(const JobProcesses& job, JobState& state, int64_t now_ms,
                                  std::vector<SampleTarget>& due) {
  if (state.requested_first_due) {
    state.requested_first_due = false;
    for (pid_t pid : job.pids) {
      auto it = pids_.find(pid);
      if (it != pids_.end() && !it->second.lasting)
        it->second.retry_after_ms = 0;
    }
  }
  const double rate = RateHz(state, now_ms) * budget_scale_;
  // A vanishing scale (one sample far over budget) must not overflow the interval.
  const double interval_ms = std::min(1000.0 / std::max(rate, 1e-9), 86400000.0);
  state.next_due_ms = now_ms + static_cast<int64_t>(interval_ms);
  const bool in_burst = InBurst(state, now_ms);
  for (pid_t pid : job.pids) {
    if (BackedOff(pid, now_ms))
      continue;
    due.push_back({job.job_id, pid, job.gpu_allocated && job.gpus_idle, in_burst});
  }
}

void CollectionPolicy::Record(pid_t /*pid*/, int64_t cost_us) {
  const int64_t cost = std::max<int64_t>(cost_us, 0);
  costs_.emplace_back(clock_->NowMs(), cost);
  cost_in_window_us_ += cost;
}

bool CollectionPolicy::RecordError(pid_t pid, const Status& error) {
  ++stats_.errors_recorded;
  const std::string reason = error.reason().empty() ? "unknown" : error.reason();
  PidState& state = pids_[pid];
  state.lasting = IsLasting(reason);
  const int64_t backoff =
      state.lasting ? options_.lasting_error_backoff_ms : options_.error_backoff_ms;
  state.retry_after_ms = clock_->NowMs() + backoff;
  return state.reported.insert(reason).second;
}

PystackHealth::PystackHealth(Clock* clock, int64_t max_age_ms)
    : clock_(clock), max_age_ms_(max_age_ms) {}

void PystackHealth::RecordError(const Status& error) {
  if (error.ok() || error.reason() == "process_exited")
    return;
  const std::string reason =
      error.reason().empty() ? std::string(StatusCodeName(error.code())) : error.reason();
  static constexpr std::string_view kPrefix = "py_stacks: ";
  std::string line = error.message();
  if (!line.starts_with(kPrefix))
    line = std::string(kPrefix) + line;
  latest_[reason] = {clock_->NowMs(), std::move(line)};
}

void PystackHealth::RecordSuccess() { last_success_ms_ = clock_->NowMs(); }

std::vector<std::string> PystackHealth::Problems() const {
  const int64_t now = clock_->NowMs();
  std::vector<std::pair<int64_t, std::string>> fresh;
  for (const auto& [reason, entry] : latest_) {
    if (now - entry.first <= max_age_ms_)
      fresh.push_back(entry);
  }
  std::stable_sort(fresh.begin(), fresh.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> lines;
  lines.reserve(fresh.size());
  for (auto& [ms, line] : fresh)
    lines.push_back(std::move(line));
  return lines;
}

std::string PystackHealth::Summary() const {
  std::string out;
  for (const std::string& line : Problems()) {
    if (!out.empty())
      out += "; ";
    out += line;
  }
  return out;
}

int64_t CollectionPolicy::TickIntervalMs() const {
  const int64_t now_ms = clock_->NowMs();
  bool burst = false;
  for (const auto& [id, state] : jobs_)
    burst = burst || InBurst(state, now_ms);
  const double hz = burst ? options_.burst_hz : options_.base_hz;
  return std::max<int64_t>(1, static_cast<int64_t>(1000.0 / hz));
}

}  // namespace expanse::pystack
