#include "attribution/gpu_view.h"

#include <algorithm>
#include <cstddef>
#include <map>

namespace expanse::attribution {

std::string_view GpuUseStateName(GpuUseState state) {
  switch (state) {
    case GpuUseState::kFree:
      return "free";
    case GpuUseState::kBusy:
      return "busy";
    case GpuUseState::kAllocatedIdle:
      return "allocated_idle";
    case GpuUseState::kUnallocatedInUse:
      return "unallocated_in_use";
  }
  return "unknown";
}

NodeGpuUse BuildNodeGpuUse(const std::vector<gpu::GpuInfo>& inventory,
                           const std::vector<JobAllocation>& allocations,
                           const std::vector<AttributedProcess>& processes) {
  NodeGpuUse node;
  std::map<std::string, size_t> position;
  for (const gpu::GpuInfo& info : inventory) {
    position.emplace(info.uuid, node.gpus.size());
    node.gpus.push_back(GpuUse{info.uuid, info.index, info.minor, {}, {}, GpuUseState::kFree});
  }

  for (const JobAllocation& allocation : allocations) {
    for (const std::string& uuid : allocation.gpu_uuids) {
      const auto it = position.find(uuid);
      if (it == position.end()) {
        if (std::find(node.allocated_unknown_gpus.begin(), node.allocated_unknown_gpus.end(),
                      uuid) == node.allocated_unknown_gpus.end()) {
          node.allocated_unknown_gpus.push_back(uuid);
        }
        continue;
      }
      std::vector<GpuJobAllocation>& jobs = node.gpus[it->second].allocated_jobs;
      const bool known = std::any_of(jobs.begin(), jobs.end(), [&](const GpuJobAllocation& job) {
        return job.job.job_id == allocation.job.job_id;
      });
      if (!known) {
        jobs.push_back(GpuJobAllocation{allocation.job, allocation.method});
      }
    }
  }

  for (const AttributedProcess& process : processes) {
    const auto it = position.find(process.process.gpu_uuid);
    if (it == position.end()) {
      node.processes_on_unknown_gpus.push_back(process);
      continue;
    }
    GpuUse& gpu = node.gpus[it->second];
    const bool of_allocated_job =
        process.job && std::any_of(gpu.allocated_jobs.begin(), gpu.allocated_jobs.end(),
                                   [&](const GpuJobAllocation& allocated) {
                                     return allocated.job.job_id == process.job->job_id;
                                   });
    gpu.processes.push_back(GpuProcessUse{process, of_allocated_job});
  }

  for (GpuUse& gpu : node.gpus) {
    const bool working = std::any_of(gpu.processes.begin(), gpu.processes.end(),
                                     [](const GpuProcessUse& use) { return use.of_allocated_job; });
    if (!gpu.allocated_jobs.empty()) {
      gpu.state = working ? GpuUseState::kBusy : GpuUseState::kAllocatedIdle;
    } else {
      gpu.state = gpu.processes.empty() ? GpuUseState::kFree : GpuUseState::kUnallocatedInUse;
    }
  }
  return node;
}

}  // namespace expanse::attribution
