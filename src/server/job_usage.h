// A job's requested-versus-used summary, computed at query time by joining the job's GPU
// allocations (job store) with the per-GPU and per-job series of the telemetry store.
// Metric names: docs/formats/metrics.md.
#ifndef EXPANSE_SERVER_JOB_USAGE_H_
#define EXPANSE_SERVER_JOB_USAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/job_store.h"
#include "tsdb/tsdb.h"

namespace expanse::server {

// A GPU counts as active in a bucket when its SM utilisation peak exceeds this (percent).
inline constexpr double kActiveSmPercent = 1.0;

struct JobUsage {
  int64_t gpus_allocated = 0;
  int64_t gpus_active = 0;  // allocated GPUs that were active at any time
  bool has_gpu_samples = false;
  double sm_mean = 0;  // percent, over every sampled GPU-second of the job
  double sm_peak = 0;
  double gpu_mem_peak_mib = 0;
  // GPU time the job held with no activity: the "allocated but idle" waste.
  double idle_gpu_hours = 0;
  double allocated_gpu_hours = 0;
  // How long before the end of the job's samples none of its GPUs was active any more (a job
  // that finished its GPU work but held the GPUs on): from the end of the last bucket in which a
  // GPU was active to the end of the last sampled bucket. 0 when no GPU was ever active.
  int64_t idle_tail_ms = 0;
  // From the job's own cgroup series; negative when unknown.
  double cpu_efficiency = -1;  // mean cores used / cores requested
  double mem_efficiency = -1;  // peak memory used / memory requested
};

// `hosts`: where the job ran (from its node events and allocations). `now_ms` closes the
// window of a running job. `buckets` bounds the work per series.
Result<JobUsage> ComputeJobUsage(tsdb::Tsdb& tsdb, const store::JobRecord& job,
                                 const std::vector<store::GpuAllocation>& allocations,
                                 const std::vector<std::string>& hosts, int64_t now_ms,
                                 int buckets = 120);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_JOB_USAGE_H_
