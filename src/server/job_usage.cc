#include "server/job_usage.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace expanse::server {
namespace {

constexpr double kMsPerHour = 3'600'000.0;
// A node's clock may be behind slurmctld's by up to MUNGE's credential lifetime (5 min), so
// the current run's Prolog may read that much before the job's start (OfCurrentRun, JobHosts).
constexpr int64_t kClockSkewMs = 5 * 60 * 1000;

bool Counted(const std::vector<tsdb::Bucket>& buckets) {
  for (const tsdb::Bucket& b : buckets) {
    if (b.count > 0)
      return true;
  }
  return false;
}

// The telemetry questions behind one job's usage, as indexes into a list of queries that a
// whole page shares. Asking (PlanJobUsage) and summing up (FoldJobUsage) are apart so that the
// one-job and the many-job forms differ only in how the questions reach the telemetry store.
struct UsagePlan {
  struct Gpu {
    Window window;
    size_t sm = 0;      // gpu.sm_util in `buckets` buckets
    size_t mem = 0;     // gpu.mem_used_mib in one
    size_t active = 0;  // gpu.sm_active in one
    size_t tensor = 0;  // gpu.tensor_active in one
    // The same from DCGM's profiling fields, used for a GPU the CUPTI helper did not count.
    size_t dcgm_active = 0;
    size_t dcgm_tensor = 0;
  };
  struct Host {
    size_t cpu = 0;  // job.cpu_used_cores in one bucket
    size_t mem = 0;  // job.mem_used_mib in one
  };
  std::vector<Gpu> gpus;  // the allocations with a non-empty window, in order
  std::vector<Host> hosts;
};

UsagePlan PlanJobUsage(const JobUsageInput& in, int64_t now_ms, int buckets,
                       std::vector<tsdb::SeriesQuery>& queries) {
  const store::JobRecord& job = in.job;
  const auto ask = [&](tsdb::SeriesKey key, int64_t from_ms, int64_t to_ms, int points) {
    queries.push_back({std::move(key), from_ms, to_ms, points});
    return queries.size() - 1;
  };
  UsagePlan plan;
  for (const store::GpuAllocation& a : in.allocations) {
    const Window w = AllocationWindow(job, a, now_ms);
    if (w.to_ms <= w.from_ms || !OfCurrentRun(job, a))
      continue;
    const size_t sm =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.sm_util"}, w.from_ms, w.to_ms, buckets);
    const size_t mem =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.mem_used_mib"}, w.from_ms, w.to_ms, 1);
    const size_t active =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.sm_active"}, w.from_ms, w.to_ms, 1);
    const size_t tensor =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.tensor_active"}, w.from_ms, w.to_ms, 1);
    const size_t dcgm_active =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.dcgm.sm_active"}, w.from_ms, w.to_ms, 1);
    const size_t dcgm_tensor =
        ask({job.compute_id, a.host, a.gpu_uuid, "gpu.dcgm.tensor_active"}, w.from_ms, w.to_ms, 1);
    plan.gpus.push_back({w, sm, mem, active, tensor, dcgm_active, dcgm_tensor});
  }
  // CPU and memory from the job's cgroup series on each of its hosts ("job/<id>" devices).
  const int64_t to = job.end_ms != 0 ? job.end_ms : now_ms;
  if (job.start_ms == 0 || to <= job.start_ms)
    return plan;
  const std::string device = "job/" + job.job_id;
  for (const std::string& host : in.hosts) {
    const size_t cpu =
        ask({job.compute_id, host, device, "job.cpu_used_cores"}, job.start_ms, to, 1);
    const size_t mem = ask({job.compute_id, host, device, "job.mem_used_mib"}, job.start_ms, to, 1);
    plan.hosts.push_back({cpu, mem});
  }
  return plan;
}

JobUsage FoldJobUsage(const JobUsageInput& in, const UsagePlan& plan,
                      const std::vector<std::vector<tsdb::Bucket>>& answers) {
  JobUsage u;
  u.gpus_allocated = std::count_if(in.allocations.begin(), in.allocations.end(),
                                   [&](const auto& a) { return OfCurrentRun(in.job, a); });
  double sm_weighted = 0;
  uint64_t sm_count = 0;
  // Count-weighted means of the counter series: each sample is a second of one GPU.
  struct Mean {
    double sum = 0;
    uint64_t count = 0;
    void Add(const std::vector<tsdb::Bucket>& buckets) {
      for (const auto& b : buckets) {
        sum += b.mean * static_cast<double>(b.count);
        count += b.count;
      }
    }
    double Value() const { return count > 0 ? sum / static_cast<double>(count) : -1; }
  } sm_active, tensor_active;
  int64_t last_active_end = 0;
  int64_t last_sampled_end = 0;
  unsigned sources = 0;  // 1: CUPTI counted some GPU, 2: DCGM did
  for (const UsagePlan::Gpu& gpu : plan.gpus) {
    const Window& w = gpu.window;
    u.allocated_gpu_hours += (w.to_ms - w.from_ms) / kMsPerHour;
    const std::vector<tsdb::Bucket>& sm_buckets = answers[gpu.sm];
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
    for (const auto& b : answers[gpu.mem])
      u.gpu_mem_peak_mib = std::max(u.gpu_mem_peak_mib, b.max);
    // Per GPU, CUPTI's counters where the helper counted, else DCGM's: one source per GPU, so
    // no second is counted twice.
    const bool cupti = Counted(answers[gpu.active]) || Counted(answers[gpu.tensor]);
    const bool dcgm =
        !cupti && (Counted(answers[gpu.dcgm_active]) || Counted(answers[gpu.dcgm_tensor]));
    sm_active.Add(answers[cupti ? gpu.active : gpu.dcgm_active]);
    tensor_active.Add(answers[cupti ? gpu.tensor : gpu.dcgm_tensor]);
    sources |= (cupti ? 1 : 0) | (dcgm ? 2 : 0);
  }
  static constexpr const char* kSources[] = {"", "cupti", "dcgm", "cupti+dcgm"};
  u.counters_source = kSources[sources];
  u.sm_active_mean = sm_active.Value();
  u.tensor_active_mean = tensor_active.Value();
  if (sm_count > 0)
    u.sm_mean = sm_weighted / static_cast<double>(sm_count);
  if (last_active_end > 0)
    u.idle_tail_ms = std::max<int64_t>(0, last_sampled_end - last_active_end);

  double cores = 0;
  double mem_peak = 0;  // sum of per-host peaks: an upper bound of the job's peak
  bool has_cpu = false;
  bool has_mem = false;
  for (const UsagePlan::Host& host : plan.hosts) {
    for (const auto& b : answers[host.cpu]) {
      cores += b.mean;
      has_cpu = true;
    }
    for (const auto& b : answers[host.mem]) {
      mem_peak += b.max;
      has_mem = true;
    }
  }
  if (has_cpu && in.job.req_cpus > 0)
    u.cpu_efficiency = cores / in.job.req_cpus;
  if (has_mem && in.job.req_mem_mib > 0)
    u.mem_efficiency = mem_peak / in.job.req_mem_mib;
  return u;
}

// The allocations (or events) of `job_id` in a batch read's answer; none when it has no entry.
template <typename Rows>
const typename Rows::mapped_type& RowsOf(const Rows& by_job, const std::string& job_id) {
  static const typename Rows::mapped_type kNone;
  const auto it = by_job.find(job_id);
  return it == by_job.end() ? kNone : it->second;
}

}  // namespace

bool OfCurrentRun(const store::JobRecord& job, const store::GpuAllocation& a) {
  if (job.start_ms == 0)
    return true;
  const bool ended_before = a.to_ms != 0 && a.to_ms < job.start_ms;
  // An earlier run on a node that failed is never closed by an Epilog, and one closed by the
  // next run's Prolog on the node ends at or after this run's start.
  const bool opened_before = a.from_ms < job.start_ms - kClockSkewMs;
  return !ended_before && !opened_before;
}

Window AllocationWindow(const store::JobRecord& job, const store::GpuAllocation& a,
                        int64_t now_ms) {
  int64_t job_end = job.end_ms != 0 ? job.end_ms : now_ms;
  int64_t from = std::max(a.from_ms, job.start_ms);
  int64_t to = a.to_ms != 0 ? std::min(a.to_ms, job_end) : job_end;
  return {from, to};
}

Result<JobUsage> ComputeJobUsage(tsdb::TelemetryStore& tsdb, const store::JobRecord& job,
                                 const std::vector<store::GpuAllocation>& allocations,
                                 const std::vector<std::string>& hosts, int64_t now_ms,
                                 int buckets) {
  const JobUsageInput in{job, allocations, hosts};
  std::vector<tsdb::SeriesQuery> queries;
  const UsagePlan plan = PlanJobUsage(in, now_ms, buckets, queries);
  std::vector<std::vector<tsdb::Bucket>> answers;
  for (const tsdb::SeriesQuery& q : queries) {
    EXPANSE_ASSIGN_OR_RETURN(auto buckets_of_q, tsdb.Query(q.key, q.from_ms, q.to_ms, q.points));
    answers.push_back(std::move(buckets_of_q));
  }
  return FoldJobUsage(in, plan, answers);
}

Result<std::vector<JobUsage>> ComputeJobUsages(tsdb::TelemetryStore& tsdb,
                                               const std::vector<JobUsageInput>& jobs,
                                               int64_t now_ms, int buckets) {
  std::vector<tsdb::SeriesQuery> queries;
  std::vector<UsagePlan> plans;
  plans.reserve(jobs.size());
  for (const JobUsageInput& in : jobs)
    plans.push_back(PlanJobUsage(in, now_ms, buckets, queries));
  EXPANSE_ASSIGN_OR_RETURN(const auto answers, tsdb.QueryMany(queries));
  std::vector<JobUsage> usages;
  usages.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    usages.push_back(FoldJobUsage(jobs[i], plans[i], answers));
  return usages;
}

std::vector<std::string> JobHosts(const store::JobRecord& job,
                                  const std::vector<store::GpuAllocation>& allocations,
                                  const std::vector<store::JobNodeEvent>& events) {
  std::set<std::string> hosts;
  for (const auto& a : allocations) {
    if (OfCurrentRun(job, a))
      hosts.insert(a.host);
  }
  for (const auto& e : events) {
    if (job.start_ms == 0 || e.at_ms >= job.start_ms - kClockSkewMs)
      hosts.insert(e.host);
  }
  return std::vector<std::string>(hosts.begin(), hosts.end());
}

Result<std::vector<JobWithUsage>> JobsWithUsage(store::JobStore& store, tsdb::TelemetryStore& tsdb,
                                                const std::vector<store::JobRecord>& page,
                                                int64_t now_ms, size_t max_rows) {
  std::vector<JobWithUsage> out(page.size());  // sized once: `inputs` refers to its hosts
  // The allocations read, kept until the usages are computed (`inputs` refers to them); a deque
  // so that adding a read moves none before it.
  std::deque<store::GpuAllocationsByJob> allocations;
  std::vector<JobUsageInput> inputs;
  std::vector<size_t> input_job;  // inputs[k] is of page[input_job[k]]
  inputs.reserve(page.size());
  size_t rows = 0;
  size_t next = 0;
  while (next < page.size() && rows <= max_rows) {
    const size_t end = std::min(page.size(), next + kUsageJobsPerRead);
    // A slice may hold jobs of several computes: the reads are per compute.
    std::map<std::string, std::vector<std::string>, std::less<>> ids_by_compute;
    for (size_t i = next; i < end; ++i)
      ids_by_compute[page[i].compute_id].push_back(page[i].job_id);
    std::map<std::string, store::GpuAllocationsByJob*, std::less<>> slice_allocations;
    std::map<std::string, store::NodeEventsByJob, std::less<>> slice_events;
    for (const auto& [compute_id, ids] : ids_by_compute) {
      EXPANSE_ASSIGN_OR_RETURN(store::GpuAllocationsByJob read,
                               store.GpuAllocationsFor(compute_id, ids));
      allocations.push_back(std::move(read));
      slice_allocations[compute_id] = &allocations.back();
      EXPANSE_ASSIGN_OR_RETURN(slice_events[compute_id], store.NodeEventsFor(compute_id, ids));
    }
    for (size_t i = next; i < end; ++i) {
      const store::JobRecord& job = page[i];
      const auto& job_allocations = RowsOf(*slice_allocations[job.compute_id], job.job_id);
      const auto& job_events = RowsOf(slice_events[job.compute_id], job.job_id);
      rows += job_allocations.size() + job_events.size();
      out[i].hosts = JobHosts(job, job_allocations, job_events);
      inputs.push_back({job, job_allocations, out[i].hosts});
      input_job.push_back(i);
    }
    next = end;
  }
  for (size_t i = next; i < page.size(); ++i)
    out[i].usage_omitted = true;
  EXPANSE_ASSIGN_OR_RETURN(std::vector<JobUsage> usages, ComputeJobUsages(tsdb, inputs, now_ms));
  for (size_t k = 0; k < inputs.size(); ++k)
    out[input_job[k]].usage = usages[k];
  return out;
}

}  // namespace expanse::server
