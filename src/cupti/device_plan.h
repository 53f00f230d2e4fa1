// DevicePlan: which counter set one GPU should run, and when the helper may next try a GPU it
// had to let go of. Pure state over a caller-supplied clock, so escalation windows and retry
// backoff are tested without waiting.
//
// Escalation ("Phase A"): the sampler asks for the Rich set for a bounded window when a job's
// GPU goes idle or its throughput drops; the GPU returns to the Light set when the window ends.
// EXPANSE_PROFILING_ENABLE=0 turns escalation off, never the Light set.
//
// Arbitration: when a job's own profiler takes the counters, the helper releases that GPU and
// retries after a backoff that doubles from `initial_backoff` to `max_backoff`, so a job's
// profiler is never fought over.
#ifndef EXPANSE_CUPTI_DEVICE_PLAN_H_
#define EXPANSE_CUPTI_DEVICE_PLAN_H_

#include <chrono>

#include "cupti/metric_sets.h"

namespace expanse::cupti {

using SteadyTime = std::chrono::steady_clock::time_point;

struct DevicePlanOptions {
  bool escalation_enabled = true;
  std::chrono::milliseconds initial_backoff{5000};
  std::chrono::milliseconds max_backoff{300'000};
};

class DevicePlan {
 public:
  explicit DevicePlan(DevicePlanOptions options) : options_(options) {}

  // The set the GPU should run at `now`.
  CounterSet Wanted(SteadyTime now) const;
  // Rich until now + window (never shortens a longer window already running). Ignored when
  // escalation is disabled; returns whether it was accepted.
  bool Escalate(SteadyTime now, std::chrono::seconds window);
  void EndEscalation() { rich_until_ = {}; }

  // The GPU was released (another profiler holds the counters, or a call failed): the next
  // attempt waits out the backoff.
  void Released(SteadyTime now);
  // Sampling runs again: the backoff starts over.
  void Resumed() { backoff_ = {}; }
  bool MayTry(SteadyTime now) const { return !held_ && now >= retry_at_; }
  // The parent asked for the GPU to be let go (a CUDA tool runs in a job there) until Resume.
  void Hold() { held_ = true; }
  void Resume() {
    held_ = false;
    retry_at_ = {};
    backoff_ = {};
  }
  bool held() const { return held_; }
  std::chrono::milliseconds current_backoff() const { return backoff_; }

 private:
  DevicePlanOptions options_;
  SteadyTime rich_until_{};
  SteadyTime retry_at_{};
  std::chrono::milliseconds backoff_{0};
  bool held_ = false;
};

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_DEVICE_PLAN_H_
