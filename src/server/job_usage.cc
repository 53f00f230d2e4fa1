#include "server/job_usage.h"

#include <algorithm>

namespace expanse::server {
namespace {

constexpr double kMsPerHour = 3'600'000.0;

struct Window {
  int64_t from_ms;
  int64_t to_ms;
};

Window AllocationWindow(const store::JobRecord& job, const store::GpuAllocation& a,
                        int64_t now_ms) {
  int64_t job_end = job.end_ms != 0 ? job.end_ms : now_ms;
  int64_t from = std::max(a.from_ms, job.start_ms);
  int64_t to = a.to_ms != 0 ? std::min(a.to_ms, job_end) : job_end;
  return {from, to};
}

}  // namespace

Result<JobUsage> ComputeJobUsage(tsdb::Tsdb& tsdb, const store::JobRecord& job,
                                 const std::vector<store::GpuAllocation>& allocations,
                                 const std::vector<std::string>& hosts, int64_t now_ms,
                                 int buckets) {
  JobUsage u;
  u.gpus_allocated = static_cast<int64_t>(allocations.size());
  double sm_weighted = 0;
  uint64_t sm_count = 0;
  int64_t last_active_end = 0;
  int64_t last_sampled_end = 0;
  for (const store::GpuAllocation& a : allocations) {
    Window w = AllocationWindow(job, a, now_ms);
    if (w.to_ms <= w.from_ms)
      continue;
    u.allocated_gpu_hours += (w.to_ms - w.from_ms) / kMsPerHour;
    tsdb::SeriesKey sm{job.compute_id, a.host, a.gpu_uuid, "gpu.sm_util"};
    EXPANSE_ASSIGN_OR_RETURN(auto sm_buckets, tsdb.Query(sm, w.from_ms, w.to_ms, buckets));
    // Idle time is the allocated time times the share of sampled buckets without activity;
    // buckets without samples say nothing either way.
    bool active = false;
    size_t idle_buckets = 0;
    for (const auto& b : sm_buckets) {
      last_sampled_end = std::max(last_sampled_end, b.end_ms);
      u.has_gpu_samples = true;
      sm_weighted += b.mean * b.count;
      sm_count += b.count;
      u.sm_peak = std::max(u.sm_peak, b.max);
      if (b.max > kActiveSmPercent) {
        active = true;
        last_active_end = std::max(last_active_end, b.end_ms);
      } else {
        ++idle_buckets;
      }
    }
    if (!sm_buckets.empty()) {
      u.idle_gpu_hours += (w.to_ms - w.from_ms) / kMsPerHour * static_cast<double>(idle_buckets) /
                          static_cast<double>(sm_buckets.size());
    }
    if (active)
      ++u.gpus_active;
    tsdb::SeriesKey mem{job.compute_id, a.host, a.gpu_uuid, "gpu.mem_used_mib"};
    EXPANSE_ASSIGN_OR_RETURN(auto mem_buckets, tsdb.Query(mem, w.from_ms, w.to_ms, 1));
    for (const auto& b : mem_buckets)
      u.gpu_mem_peak_mib = std::max(u.gpu_mem_peak_mib, b.max);
  }
  if (sm_count > 0)
    u.sm_mean = sm_weighted / static_cast<double>(sm_count);
  if (last_active_end > 0)
    u.idle_tail_ms = std::max<int64_t>(0, last_sampled_end - last_active_end);

  // CPU and memory from the job's cgroup series on each of its hosts ("job/<id>" devices).
  if (job.start_ms != 0) {
    int64_t to = job.end_ms != 0 ? job.end_ms : now_ms;
    std::string device = "job/" + job.job_id;
    double cores = 0;
    double mem_peak = 0;  // sum of per-host peaks: an upper bound of the job's peak
    bool has_cpu = false;
    bool has_mem = false;
    for (const std::string& host : hosts) {
      if (to <= job.start_ms)
        break;
      EXPANSE_ASSIGN_OR_RETURN(
          auto cpu,
          tsdb.Query({job.compute_id, host, device, "job.cpu_used_cores"}, job.start_ms, to, 1));
      for (const auto& b : cpu) {
        cores += b.mean;
        has_cpu = true;
      }
      EXPANSE_ASSIGN_OR_RETURN(
          auto mem,
          tsdb.Query({job.compute_id, host, device, "job.mem_used_mib"}, job.start_ms, to, 1));
      for (const auto& b : mem) {
        mem_peak += b.max;
        has_mem = true;
      }
    }
    if (has_cpu && job.req_cpus > 0)
      u.cpu_efficiency = cores / job.req_cpus;
    if (has_mem && job.req_mem_mib > 0)
      u.mem_efficiency = mem_peak / job.req_mem_mib;
  }
  return u;
}

}  // namespace expanse::server
