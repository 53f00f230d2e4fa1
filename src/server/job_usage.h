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
#include "tsdb/telemetry_store.h"

namespace expanse::server {

// A GPU counts as active in a bucket when its utilisation (gpu.sm_util: the share of time a
// kernel ran, from NVML) peaks above this (percent).
inline constexpr double kActiveSmPercent = 1.0;

struct JobUsage {
  int64_t gpus_allocated = 0;
  int64_t gpus_active = 0;  // allocated GPUs that were active at any time
  bool has_gpu_samples = false;
  double sm_mean = 0;  // percent, over every sampled GPU-second of the job
  double sm_peak = 0;
  // Hardware counters, ratios 0..1 over every counted GPU-second of the job's GPUs: per GPU the
  // CUPTI helper's (gpu.sm_active, gpu.tensor_active), or DCGM's profiling fields
  // (gpu.dcgm.*) for a GPU the helper did not count; negative when neither reached the server
  // (no helper or DCGM, no permission, no GPU).
  double sm_active_mean = -1;
  double tensor_active_mean = -1;
  // Where those came from: "cupti", "dcgm", "cupti+dcgm" (some GPUs each), "" for neither.
  std::string counters_source;
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
// window of a running job. `buckets` bounds the work per series. Asks the telemetry store one
// question at a time; for many jobs at once, ComputeJobUsages.
Result<JobUsage> ComputeJobUsage(tsdb::TelemetryStore& tsdb, const store::JobRecord& job,
                                 const std::vector<store::GpuAllocation>& allocations,
                                 const std::vector<std::string>& hosts, int64_t now_ms,
                                 int buckets = 120);

// One job of ComputeJobUsages: ComputeJobUsage's arguments, which must outlive the call.
struct JobUsageInput {
  const store::JobRecord& job;
  const std::vector<store::GpuAllocation>& allocations;
  const std::vector<std::string>& hosts;
};

// ComputeJobUsage of each job, the same values, from one Tsdb::QueryMany: a page of the job list
// asks two questions per GPU and two per host, hundreds in all.
Result<std::vector<JobUsage>> ComputeJobUsages(tsdb::TelemetryStore& tsdb,
                                               const std::vector<JobUsageInput>& jobs,
                                               int64_t now_ms, int buckets = 120);

// The part of the job's life during which allocation `a` was the job's: a GPU's series outside
// it are another job's use (a GPU given to the job late, or taken back before it ended).
struct Window {
  int64_t from_ms;
  int64_t to_ms;
};
Window AllocationWindow(const store::JobRecord& job, const store::GpuAllocation& a, int64_t now_ms);

// Whether allocation `a` is of the job's current run: one that ended before the job's start
// (the latest run's, as SLURM reports it), or opened more than 5 minutes before it, was an
// earlier run's (a job requeued after a node failure) and is not counted in this run's GPUs.
bool OfCurrentRun(const store::JobRecord& job, const store::GpuAllocation& a);

// Where the job's current run ran: the hosts of its GPU allocations (OfCurrentRun) and of its
// Prolog/Epilog events (those from 5 minutes before its start on), sorted, each once. An
// earlier run's node (a requeued job) would halve the CPUs per host a verdict reckons with.
std::vector<std::string> JobHosts(const store::JobRecord& job,
                                  const std::vector<store::GpuAllocation>& allocations,
                                  const std::vector<store::JobNodeEvent>& events);

// What the job list shows of a job besides its record.
struct JobWithUsage {
  std::vector<std::string> hosts;
  JobUsage usage;
  // The page's budget (JobsWithUsage) was spent before this job: hosts and usage left empty.
  bool usage_omitted = false;
};

// GPU allocations and node events one page of the job list reads at most (about 2,000 jobs of 8
// GPUs on one node each). Each costs a row in memory and a handful of telemetry questions;
// without a bound, a compute whose daemon gave a thousand jobs 16,384 made-up GPUs each
// (JobStore::kMaxRowsPerJob) made one page read 16 M rows and ask 100 M questions.
inline constexpr size_t kMaxUsageRowsPerPage = 65'536;
// Jobs whose rows are read together: bounds what one read may bring past the budget.
inline constexpr size_t kUsageJobsPerRead = 32;

// JobHosts and usage of each job of a page (of any computes), in page order: two store reads
// per compute for each kUsageJobsPerRead jobs and one QueryMany, where a read of each per job and
// four telemetry queries per GPU and host added up to hundreds of lock acquisitions and SQLite
// statements. Once the jobs read hold more than `max_rows` allocations and events, the later
// jobs of the page are not read (usage_omitted).
Result<std::vector<JobWithUsage>> JobsWithUsage(store::JobStore& store, tsdb::TelemetryStore& tsdb,
                                                const std::vector<store::JobRecord>& page,
                                                int64_t now_ms,
                                                size_t max_rows = kMaxUsageRowsPerPage);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_JOB_USAGE_H_
