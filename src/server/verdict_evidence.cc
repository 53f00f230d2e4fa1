#include "server/verdict_evidence.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "server/job_usage.h"

namespace expanse::server {
namespace {

// The series read per GPU and per host, in the order of the queries.
enum GpuSeries {
  kUtil,
  kPower,
  kMem,
  kProcesses,
  kSmActive,
  kDcgmSmActive,
  kAllocatedJobs,
  kGpuSeriesCount
};
constexpr const char* kGpuMetrics[] = {"gpu.sm_util",       "gpu.power_w",   "gpu.mem_used_mib",
                                       "gpu.processes",     "gpu.sm_active", "gpu.dcgm.sm_active",
                                       "gpu.allocated_jobs"};
enum HostSeries { kCpu, kCpuWait, kJobGpuProcesses, kIoSome, kUninterruptible, kHostSeriesCount };
constexpr const char* kHostMetrics[] = {"job.cpu_used_cores", "job.cpu_wait_cores",
                                        "job.gpu_processes", "job.io_pressure_some",
                                        "job.uninterruptible_some"};

size_t CellOf(const JobCells& cells, int64_t t_ms) {
  if (t_ms <= cells.start_ms)
    return 0;
  return std::min(cells.cells, static_cast<size_t>((t_ms - cells.start_ms) / cells.cell_ms));
}

size_t CellEnd(const JobCells& cells, int64_t t_ms) {
  if (t_ms <= cells.start_ms)
    return 0;
  const int64_t span = t_ms - cells.start_ms;
  return std::min(cells.cells, static_cast<size_t>((span + cells.cell_ms - 1) / cells.cell_ms));
}

// Process counts are a state read once per flush (every 10 s by default), so a cell as short
// as a flush may hold none: a count holds until the next one, for at most kCountHoldMs, so
// that such a cell is not "processes unknown" between two that say none ran.
constexpr int64_t kCountHoldMs = 60'000;

// `count(i)` is cell i's count, -1 when none was read in it.
template <typename CountOf>
void HoldCounts(size_t cells, int64_t cell_ms, CountOf count) {
  double last = -1;
  int64_t since_ms = 0;
  for (size_t i = 0; i < cells; ++i) {
    double& v = count(i);
    if (v >= 0) {
      last = v;
      since_ms = 0;
      continue;
    }
    since_ms += cell_ms;
    if (last >= 0 && since_ms <= kCountHoldMs)
      v = last;
  }
}

}  // namespace

std::map<std::string, GpuModel> GpuModelsFromHeartbeat(std::string_view heartbeat_json) {
  std::map<std::string, GpuModel> out;
  const nlohmann::json doc = nlohmann::json::parse(heartbeat_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array())
    return out;
  for (const auto& node : doc["nodes"]) {
    if (!node.is_object() || !node.contains("gpus") || !node["gpus"].is_array())
      continue;
    for (const auto& gpu : node["gpus"]) {
      if (!gpu.is_object() || !gpu.contains("uuid") || !gpu["uuid"].is_string())
        continue;
      GpuModel m;
      if (gpu.contains("model") && gpu["model"].is_string())
        m.model = gpu["model"].get<std::string>();
      if (gpu.contains("memory_total_mib") && gpu["memory_total_mib"].is_number())
        m.memory_total_mib = gpu["memory_total_mib"].get<double>();
      out[gpu["uuid"].get<std::string>()] = m;
    }
  }
  return out;
}

Result<JobCells> GatherJobCells(tsdb::TelemetryStore& tsdb, const store::JobRecord& job,
                                const std::vector<store::GpuAllocation>& all_allocations,
                                const std::vector<std::string>& hosts,
                                const std::map<std::string, GpuModel>& models, int64_t now_ms) {
  // An earlier run's GPUs (a requeued job) are not this run's: neither tracks nor the grid's
  // start, which would otherwise judge the time between the runs.
  std::vector<store::GpuAllocation> allocations;
  for (const store::GpuAllocation& a : all_allocations) {
    if (OfCurrentRun(job, a))
      allocations.push_back(a);
  }
  JobCells cells;
  cells.requested_gpus = job.req_gpus;
  // From the allocation's start (the Prolog), not the first process.
  int64_t start = job.start_ms;
  for (const store::GpuAllocation& a : allocations) {
    if (a.from_ms > 0 && (start == 0 || a.from_ms < start))
      start = a.from_ms;
  }
  const int64_t end = job.end_ms != 0 ? job.end_ms : now_ms;
  if (start == 0 || end <= start)
    return cells;
  const int64_t span = end - start;
  // Fewer cells for jobs with many GPUs or hosts: each GPU and each host holds a track of
  // cells (and its series' buckets), so together they share kMaxVerdictGpuCells. A job has at
  // most kMaxRowsPerJob allocations and as many hosts from node events: 6 cells or more.
  const size_t tracks = allocations.size() + hosts.size();
  const size_t max_cells =
      std::clamp<size_t>(kMaxVerdictGpuCells / std::max<size_t>(1, tracks), 1, kMaxVerdictCells);
  int64_t cell = std::max<int64_t>(kMinVerdictCellMs, (span + static_cast<int64_t>(max_cells) - 1) /
                                                          static_cast<int64_t>(max_cells));
  cell = (cell + kMinVerdictCellMs - 1) / kMinVerdictCellMs * kMinVerdictCellMs;
  cells.cells = static_cast<size_t>((span + cell - 1) / cell);
  // The cell that makes that many end exactly at the job's end (the telemetry store's buckets
  // for [start, end) in that many points), so no cell reads past the job: the next job's
  // samples on the same GPU stay out.
  cells.cell_ms =
      (span + static_cast<int64_t>(cells.cells) - 1) / static_cast<int64_t>(cells.cells);
  cells.start_ms = start;
  cells.end_ms = end;
  cells.running = job.end_ms == 0;
  const int64_t grid_end = end;
  const int points = static_cast<int>(cells.cells);

  std::vector<tsdb::SeriesQuery> queries;
  for (const store::GpuAllocation& a : allocations) {
    GpuTrack gpu;
    gpu.host = a.host;
    gpu.uuid = a.gpu_uuid;
    if (auto m = models.find(a.gpu_uuid); m != models.end()) {
      gpu.model = m->second.model;
      gpu.memory_total_mib = m->second.memory_total_mib;
    }
    gpu.first_cell = CellOf(cells, std::max(a.from_ms, start));
    gpu.end_cell = CellEnd(cells, a.to_ms != 0 ? std::min(a.to_ms, end) : end);
    gpu.cells.resize(cells.cells);
    cells.gpus.push_back(std::move(gpu));
    for (const char* metric : kGpuMetrics)
      queries.push_back({{job.compute_id, a.host, a.gpu_uuid, metric}, start, grid_end, points});
  }
  const std::string device = "job/" + job.job_id;
  const double cores_per_host = job.req_cpus > 0
                                    ? static_cast<double>(job.req_cpus) /
                                          static_cast<double>(std::max<size_t>(1, hosts.size()))
                                    : -1;
  for (const std::string& host : hosts) {
    HostTrack track;
    track.host = host;
    track.cores_allocated = cores_per_host;
    track.cpu_cores.assign(cells.cells, -1);
    track.cpu_wait.assign(cells.cells, -1);
    track.gpu_processes.assign(cells.cells, -1);
    track.io_some.assign(cells.cells, -1);
    track.uninterruptible.assign(cells.cells, -1);
    cells.hosts.push_back(std::move(track));
    for (const char* metric : kHostMetrics)
      queries.push_back({{job.compute_id, host, device, metric}, start, grid_end, points});
  }
  EXPANSE_ASSIGN_OR_RETURN(const auto answers, tsdb.QueryMany(queries));

  size_t q = 0;
  for (GpuTrack& gpu : cells.gpus) {
    for (int s = 0; s < kGpuSeriesCount; ++s, ++q) {
      for (const tsdb::Bucket& b : answers[q]) {
        const size_t i = CellOf(cells, b.start_ms);
        if (i >= cells.cells || b.count == 0)
          continue;
        GpuCell& c = gpu.cells[i];
        switch (s) {
          case kUtil:
            c.samples = b.count;
            c.util_mean = b.mean;
            c.util_max = b.max;
            break;
          case kPower:
            c.power_mean = b.mean;
            break;
          case kMem:
            c.mem_max_mib = b.max;
            break;
          case kProcesses:
            c.processes = b.max;
            break;
          case kSmActive:
            c.sm_active = b.mean;
            break;
          case kDcgmSmActive:
            if (c.sm_active < 0)  // CUPTI's where the helper counted
              c.sm_active = b.mean;
            break;
          case kAllocatedJobs:
            c.allocated_jobs = b.max;
            break;
        }
      }
    }
  }
  for (HostTrack& host : cells.hosts) {
    for (int s = 0; s < kHostSeriesCount; ++s, ++q) {
      for (const tsdb::Bucket& b : answers[q]) {
        const size_t i = CellOf(cells, b.start_ms);
        if (i >= cells.cells || b.count == 0)
          continue;
        switch (s) {
          case kCpu:
            host.cpu_cores[i] = b.mean;
            break;
          case kCpuWait:
            host.cpu_wait[i] = b.mean;
            break;
          case kJobGpuProcesses:
            host.gpu_processes[i] = b.max;
            break;
          case kIoSome:
            host.io_some[i] = b.mean;
            break;
          case kUninterruptible:
            host.uninterruptible[i] = b.mean;
            break;
        }
      }
    }
  }
  for (GpuTrack& gpu : cells.gpus) {
    HoldCounts(gpu.cells.size(), cells.cell_ms,
               [&](size_t i) -> double& { return gpu.cells[i].processes; });
    HoldCounts(gpu.cells.size(), cells.cell_ms,
               [&](size_t i) -> double& { return gpu.cells[i].allocated_jobs; });
  }
  for (HostTrack& host : cells.hosts) {
    HoldCounts(host.gpu_processes.size(), cells.cell_ms,
               [&](size_t i) -> double& { return host.gpu_processes[i]; });
  }
  return cells;
}

Result<std::vector<Verdict>> JobVerdicts(store::JobStore& jobs, const store::JobRecord& job,
                                         const JobCells& cells, const VerdictThresholds& thresholds,
                                         size_t max_stack_reads) {
  SeriesVerdicts series = ComputeSeriesVerdicts(cells, thresholds);
  std::vector<Verdict> out = std::move(series.verdicts);
  // The longest open intervals first, so the bound drops the least telling.
  std::sort(series.underused.begin(), series.underused.end(),
            [](const Underused& a, const Underused& b) {
              return a.to_ms - a.from_ms > b.to_ms - b.from_ms;
            });
  if (series.underused.size() > max_stack_reads)
    series.underused.resize(max_stack_reads);
  for (const Underused& interval : series.underused) {
    EXPANSE_ASSIGN_OR_RETURN(auto stacks, jobs.JobStacks(job.compute_id, job.job_id,
                                                         interval.from_ms, interval.to_ms, 1000));
    if (auto verdict = ExplainUnderused(interval, stacks, thresholds))
      out.push_back(std::move(*verdict));
  }
  std::sort(out.begin(), out.end(), [](const Verdict& a, const Verdict& b) {
    return std::tie(a.from_ms, a.code, a.to_ms) < std::tie(b.from_ms, b.code, b.to_ms);
  });
  return out;
}

}  // namespace expanse::server
