// The node's per-GPU use view for upload: which jobs hold each GPU, which processes run on it
// and whether they belong there (docs/attribution.md). The daemon computes it once per flush
// from NVML's process list, /proc, and the allocations its hooks recorded; the heartbeat carries
// the latest view of every node (docs/formats/heartbeat.md, `nodes[].gpus[].use`) and a few
// series keep its history (docs/formats/metrics.md).
#ifndef EXPANSE_AGENT_GPU_USE_H_
#define EXPANSE_AGENT_GPU_USE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attribution/gpu_view.h"
#include "attribution/process_attribution.h"
#include "telemetry/series_buffer.h"
#include "wire/records.h"

namespace expanse::agent {

// Caps keep a heartbeat bounded whatever runs on a node (the server refuses more).
inline constexpr size_t kMaxUseJobsPerGpu = 16;
inline constexpr size_t kMaxUseProcessesPerGpu = 64;

// `open_allocations` is the collector's map "<host>/<job id>" -> the GPU allocations of jobs
// still running on this node.
std::vector<attribution::JobAllocation> AllocationsFromOpen(
    const std::map<std::string, std::vector<wire::GpuAllocationRecord>>& open_allocations);

struct GpuUseResult {
  attribution::NodeGpuUse view;
  attribution::AttributionCounters counters;
};

GpuUseResult ComputeGpuUse(const std::vector<gpu::GpuInfo>& inventory,
                           const std::vector<gpu::GpuProcess>& processes,
                           const std::vector<attribution::JobAllocation>& allocations,
                           const attribution::AttributionOptions& options);

// [{"uuid", "state", "jobs": [...], "processes": [{"pid", "job_id", "used_memory_mib",
// "of_allocated_job", "outside_cgroup"}]}], in inventory order, capped as above.
nlohmann::json GpuUseToJson(const attribution::NodeGpuUse& view);

// Adds the view's history at `at_ms`: per GPU `gpu.processes`, `gpu.foreign_processes`
// (processes not of a job allocated that GPU, including one that left its job's cgroup) and
// `gpu.allocated_jobs` (the jobs SLURM gave it to: several with gres/shard or MPS), and
// per job `job.gpu_memory_mib` and `job.gpu_processes` (device `job/<numeric id>`, as the cgroup
// series, so the controller's array/het renaming applies to both).
// Without `processes_known` (NVML could not list them) only gpu.allocated_jobs: the rest would
// say "no process" where nothing is known.
void AddGpuUseSeries(const attribution::NodeGpuUse& view, const std::string& host, int64_t at_ms,
                     telemetry::SeriesBuffer& buffer, bool processes_known = true);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_GPU_USE_H_
