// The idle ledger: per job and allocated GPU, how many GPU-seconds were requested, allocated,
// sampled, active and idle, counted from the allocation's start (the Prolog, not the first
// process) to its end. Definitions and bucket arithmetic: docs/formats/idle-ledger.md.
//
// Activity is read from gpu.sm_util (NVML utilisation) on a fixed grid of kLedgerBucketMs
// cells aligned to Unix time: a cell cut by the counted interval's ends counts only the part
// inside, and only the samples inside. A GPU is active in a cell when a sample in it peaks
// above kActiveSmPercent; the cell's whole counted part is then active GPU time. Everything
// else of the allocation (idle cells, cells without samples, a GPU never sampled) is idle.
// All figures are integer milliseconds, so they add up exactly, and the ledger of a window
// whose bounds are multiples of kLedgerBucketMs is the sum of those of its sub-windows.
#ifndef EXPANSE_SERVER_IDLE_LEDGER_H_
#define EXPANSE_SERVER_IDLE_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/job_store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

// The ledger's resolution: one minute, aligned to Unix time (UTC minutes).
inline constexpr int64_t kLedgerBucketMs = 60'000;

// The counted window: [from_ms, to_ms). The default counts everything.
struct LedgerWindow {
  int64_t from_ms = 0;
  int64_t to_ms = std::numeric_limits<int64_t>::max();
};

// One allocated GPU of a job. Durations are GPU-milliseconds inside the counted interval.
struct GpuLedger {
  std::string host;
  std::string gpu_uuid;
  int64_t gpu_index = -1;
  int64_t from_ms = 0;  // the allocation as stored
  int64_t to_ms = 0;    // 0: still allocated
  // The counted interval: the allocation, ended by its own end, else by the job's end, else by
  // now, and clipped to the window and to now. Empty (counted_to_ms == counted_from_ms) when
  // nothing of the allocation lies inside.
  int64_t counted_from_ms = 0;
  int64_t counted_to_ms = 0;
  int64_t allocated_ms = 0;  // counted_to_ms - counted_from_ms
  int64_t sampled_ms = 0;    // the parts of cells with at least one gpu.sm_util sample
  int64_t active_ms = 0;     // the parts of cells whose peak is above kActiveSmPercent

  int64_t idle_ms() const { return allocated_ms - active_ms; }
  // Held (some time counted) and never active in it; a GPU never sampled counts here too.
  bool never_used() const { return allocated_ms > 0 && active_ms == 0; }
};

// Sums over GPUs (and, in a rollup, jobs). Only GPUs with counted time count in `gpus`.
struct LedgerTotals {
  int64_t gpus = 0;
  int64_t never_used_gpus = 0;
  // Requested GPUs times the job's run time (SLURM start to end, or now) inside the window;
  // saturates at INT64_MAX, as req_gpus is what a compute reported.
  int64_t requested_ms = 0;
  int64_t allocated_ms = 0;
  int64_t sampled_ms = 0;
  int64_t active_ms = 0;

  int64_t idle_ms() const { return allocated_ms - active_ms; }
  void Add(const LedgerTotals& other);
};

struct JobLedger {
  int64_t requested_gpus = 0;   // from the job record
  std::vector<GpuLedger> gpus;  // one per allocation, in the store's order
  LedgerTotals totals;
};

// One job of ComputeJobLedgers; the references must outlive the call.
struct LedgerJobInput {
  const store::JobRecord& job;
  const std::vector<store::GpuAllocation>& allocations;
};

// The ledger of each job, in order, inside `window`, as of `now_ms`. Reads the telemetry store
// in rounds of at most `max_cells_per_read` grid cells (one QueryMany each), so memory stays
// bounded however many jobs are asked about; an allocation longer than that is read alone.
Result<std::vector<JobLedger>> ComputeJobLedgers(tsdb::TelemetryStore& tsdb,
                                                 const std::vector<LedgerJobInput>& jobs,
                                                 const LedgerWindow& window, int64_t now_ms,
                                                 size_t max_cells_per_read = 250'000);

// a + b and a * b for non-negative values, INT64_MAX where they would overflow.
int64_t SaturatingAdd(int64_t a, int64_t b);
int64_t SaturatingMul(int64_t a, int64_t b);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_IDLE_LEDGER_H_
