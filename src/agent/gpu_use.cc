#include "agent/gpu_use.h"

#include <cstdlib>
#include <set>

namespace expanse::agent {

std::vector<attribution::JobAllocation> AllocationsFromOpen(
    const std::map<std::string, std::vector<wire::GpuAllocationRecord>>& open_allocations) {
  std::vector<attribution::JobAllocation> out;
  for (const auto& [key, entries] : open_allocations) {
    if (entries.empty())
      continue;
    attribution::JobAllocation allocation;
    // The hooks record the Prolog's SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES, resolved to UUIDs.
    allocation.method = attribution::AllocationMethod::kSlurmJobGpus;
    for (const wire::GpuAllocationRecord& e : entries) {
      allocation.job.display_id = e.job_id;
      allocation.job.job_id =
          e.slurm_job_id != 0 ? static_cast<uint32_t>(e.slurm_job_id)
                              : static_cast<uint32_t>(std::strtoul(e.job_id.c_str(), nullptr, 10));
      allocation.gpu_uuids.push_back(e.gpu_uuid);
    }
    if (allocation.job.job_id != 0 && !allocation.gpu_uuids.empty())
      out.push_back(std::move(allocation));
  }
  return out;
}

GpuUseResult ComputeGpuUse(const std::vector<gpu::GpuInfo>& inventory,
                           const std::vector<gpu::GpuProcess>& processes,
                           const std::vector<attribution::JobAllocation>& allocations,
                           const attribution::AttributionOptions& options) {
  GpuUseResult out;
  attribution::ProcessAttributionResult attributed;
  if (!processes.empty())
    attributed = attribution::AttributeProcesses(processes, options);
  out.counters = attributed.counters;
  out.view = attribution::BuildNodeGpuUse(inventory, allocations, attributed.processes);
  return out;
}

namespace {

// The hooks know a job by its number (SLURM_JOB_ID) and so does a process's cgroup; a
// process's environment may add the array or het display id. Numbers keep both sources
// comparable; the controller renames them for upload.
std::string JobNumber(const attribution::SlurmJob& job) { return std::to_string(job.job_id); }

}  // namespace

nlohmann::json GpuUseToJson(const attribution::NodeGpuUse& view) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const attribution::GpuUse& g : view.gpus) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const auto& a : g.allocated_jobs) {
      if (jobs.size() < kMaxUseJobsPerGpu)
        jobs.push_back(JobNumber(a.job));
    }
    nlohmann::json procs = nlohmann::json::array();
    for (const attribution::GpuProcessUse& p : g.processes) {
      if (procs.size() >= kMaxUseProcessesPerGpu)
        break;
      nlohmann::json entry = {{"pid", p.process.process.pid},
                              {"of_allocated_job", p.of_allocated_job},
                              {"outside_cgroup", p.process.outside_cgroup}};
      if (p.process.job)
        entry["job_id"] = JobNumber(*p.process.job);
      if (p.process.process.used_memory_mib)
        entry["used_memory_mib"] = *p.process.process.used_memory_mib;
      procs.push_back(std::move(entry));
    }
    gpus.push_back({{"uuid", g.uuid},
                    {"state", std::string(attribution::GpuUseStateName(g.state))},
                    {"jobs", std::move(jobs)},
                    {"processes", std::move(procs)}});
  }
  return gpus;
}

void AddGpuUseSeries(const attribution::NodeGpuUse& view, const std::string& host, int64_t at_ms,
                     telemetry::SeriesBuffer& buffer, bool processes_known) {
  std::map<std::string, std::pair<double, double>> per_job;  // number -> (MiB, processes)
  for (const attribution::GpuUse& g : view.gpus) {
    // Several with gres/shard or MPS: the verdicts then read the GPU's utilisation as the
    // jobs' together, not as each one's.
    buffer.Add({host, g.uuid, "gpu.allocated_jobs"}, at_ms,
               static_cast<double>(g.allocated_jobs.size()));
    if (!processes_known)
      continue;
    double foreign = 0;
    for (const attribution::GpuProcessUse& p : g.processes) {
      if (!p.of_allocated_job)
        ++foreign;
      if (p.process.job) {
        auto& [mib, count] = per_job[JobNumber(*p.process.job)];
        mib += static_cast<double>(p.process.process.used_memory_mib.value_or(0));
        ++count;
      }
    }
    buffer.Add({host, g.uuid, "gpu.processes"}, at_ms, static_cast<double>(g.processes.size()));
    buffer.Add({host, g.uuid, "gpu.foreign_processes"}, at_ms, foreign);
  }
  if (!processes_known)
    return;
  // A running job whose processes all left the GPUs reports 0, not silence.
  for (const attribution::GpuUse& g : view.gpus) {
    for (const auto& a : g.allocated_jobs)
      per_job.try_emplace(JobNumber(a.job), 0.0, 0.0);
  }
  for (const auto& [job, totals] : per_job) {
    buffer.Add({host, "job/" + job, "job.gpu_memory_mib"}, at_ms, totals.first);
    buffer.Add({host, "job/" + job, "job.gpu_processes"}, at_ms, totals.second);
  }
}

}  // namespace expanse::agent
