// CounterHelper: the sampler's side of expanse-cupti-helper (docs/formats/cupti-helper.md).
//
// It runs the helper as a child for the GPUs NVML lists, turns its per-second counter records
// into series (gpu.sm_active, gpu.tensor_active, …, keyed by GPU UUID like the NVML series),
// forwards escalation requests, and keeps what the helper said about each GPU for the `cupti`
// capability. Everything the helper writes is hostile input: a line that does not parse is
// refused and counted. A helper that exits, or says nothing for `silence_limit` (stuck in a
// driver call its own deadline did not catch), is stopped and started again after a backoff
// that doubles up to `restart_max`. A relative `helper` (EXPANSE_CUPTI_HELPER, kept by the
// settings so that a typo does not stop the daemon) is never run; Describe says why. The
// daemon never waits on the helper: each Tick reads only what is already there.
#ifndef EXPANSE_AGENT_COUNTER_HELPER_H_
#define EXPANSE_AGENT_COUNTER_HELPER_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/capabilities.h"
#include "agent/runtime_settings.h"
#include "core/child_process.h"
#include "core/clock.h"
#include "telemetry/series_buffer.h"

namespace expanse::agent {

struct CounterHelperOptions {
  std::string helper;  // the executable; see FindCuptiHelper
  std::string hostname;
  bool escalation = true;  // EXPANSE_PROFILING_ENABLE
  std::chrono::milliseconds period{1000};
  std::chrono::milliseconds silence_limit{30'000};
  std::chrono::milliseconds restart_initial{5'000};
  std::chrono::milliseconds restart_max{300'000};
  std::vector<std::string> extra_args;  // before the subcommand (tests: --libcuda, --libcupti)
  std::optional<std::vector<std::string>> env;  // unset: the daemon's environment
};

// Where the helper is: EXPANSE_CUPTI_HELPER, else the installed per-node copy
// <prefix>/lib/cupti-nodes/<host>/bin/expanse-cupti-helper; "" without either.
std::string FindCuptiHelper(const RuntimeSettings& settings, const std::string& shared_prefix,
                            const std::string& hostname);

class CounterHelper {
 public:
  // `wall` dates records (they must be near now); `monotonic` times silence and restarts, which a
  // wall-clock step must not trigger or hold back. The period is kept within what the helper
  // accepts (0.1 to 60 s) and the silence limit to at least three periods.
  CounterHelper(CounterHelperOptions options, Clock& wall, Clock& monotonic);
  ~CounterHelper();

  // Starts (or restarts, when the set of GPUs changed) the helper for `uuids`, and adds the
  // counters it has written since the last call to `buffer` under `buffer_mu`.
  void Tick(const std::vector<std::string>& uuids, telemetry::SeriesBuffer& buffer,
            std::mutex& buffer_mu);
  // The Rich set on that GPU for `window` (ignored when escalation is off).
  void Escalate(const std::string& uuid, std::chrono::seconds window);
  // The GPUs where a job runs another CUDA tool (Nsight, a CUPTI profiler): the helper lets
  // them go until they leave this set, so a job's own profiler gets the counters.
  void HoldFor(const std::set<std::string>& uuids);

  // Whether a helper runs and samples, or is about to sample, some GPU, or has yielded one to a
  // job's own profiler; or a GPU is held for a job's CUDA tool (HoldFor), with or without a
  // helper; or the last helper sampled and a new one is due after its backoff: the counters
  // are then not DCGM's to take, and the DCGM enrichment leaves its profiling fields out. That
  // last hold ends with the next helper that stops without reporting any GPU.
  bool HoldsCounters() const;
  // The `cupti` capability as the running helper reports it.
  Capability Describe() const;
  // Records read, refused, values dropped out of range, restarts, the last exit and each GPU's
  // state, for the health file.
  nlohmann::json Stats() const;

 private:
  void Start(int64_t now_ms);
  void Stopped(int64_t now_ms, const std::string& why);
  // Ends the running helper without waiting for it (ChildProcess::Terminate); later Ticks reap it.
  void Retire();
  void Handle(const std::string& line, int64_t now_ms, telemetry::SeriesBuffer& buffer,
              std::mutex& buffer_mu);

  CounterHelperOptions options_;
  Clock& wall_;
  Clock& monotonic_;
  std::unique_ptr<ChildProcess> child_;
  std::vector<std::unique_ptr<ChildProcess>> stopping_;  // terminated, not reaped yet
  std::vector<std::string> uuids_;                       // the GPUs the running helper samples
  std::set<std::string> held_;                           // GPUs left to a job's own CUDA tool
  int64_t last_line_ms_ = 0;
  // A helper that has sent counters and run this long counts as working: its backoff starts
  // over.
  static constexpr int64_t kWorkingAfterMs = 60'000;
  int64_t started_ms_ = 0;          // when the running helper started
  bool counters_seen_ = false;      // it has sent counters
  bool only_dropped_ = false;       // the last record's values were all out of range
  bool waiting_for_stuck_ = false;  // a restart is due, but an old helper has not ended
  int64_t restart_at_ms_ = 0;
  std::chrono::milliseconds backoff_{0};
  std::string last_exit_;  // why the helper last stopped ("" while none has)
  std::string fatal_;      // the reason on its last "fatal" record
  struct GpuState {
    std::string pm_sampling;  // ok | unavailable | yielded
    std::string reason, fix;
    size_t series = 0;
  };
  std::map<std::string, GpuState> gpus_;
  // Whether the helper that stopped last sampled some GPU, so the counters stay its own
  // through the backoff (HoldsCounters); cleared by the next that stops without having said
  // anything of its GPUs (a crash loop, a failed start, a removed binary).
  bool held_in_backoff_ = false;
  // Per GPU, the last counters record accepted and the records it may still send ahead of
  // one per period (Handle).
  struct LastCounters {
    int64_t unix_ms = 0;
    double tokens = 0;
  };
  std::map<std::string, LastCounters> last_counters_;
  // Restarts for a changed GPU set: when the last was, and how long the next waits.
  int64_t set_changed_ms_ = 0;
  std::chrono::milliseconds set_change_backoff_{0};
  uint64_t set_changes_ = 0;
  uint64_t records_ = 0, refused_ = 0, samples_ = 0, restarts_ = 0, escalations_ = 0;
  uint64_t releases_ = 0;
  std::string last_refusal_;
  // Values of accepted records left out for being beyond their series' range (ParseRecord).
  uint64_t dropped_values_ = 0;
  std::string last_dropped_value_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_COUNTER_HELPER_H_
