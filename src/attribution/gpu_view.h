// The per-GPU picture of one node at one sampling instant: which jobs hold each GPU, which
// processes run on it, and whether it is doing the allocated job's work. Pure.
//
// Allocations and processes arrive separately on purpose: an allocation may come from a hook
// event (Prolog) for a job too short to ever be seen in a sample, and a process may have no
// allocation at all (a non-SLURM process, or one that left its job's cgroup).
#ifndef EXPANSE_ATTRIBUTION_GPU_VIEW_H_
#define EXPANSE_ATTRIBUTION_GPU_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/allocation.h"
#include "attribution/process_attribution.h"
#include "attribution/slurm_job.h"
#include "gpu/backend.h"

namespace expanse::attribution {

enum class GpuUseState {
  kFree,              // no allocation, no process
  kBusy,              // a process of a job allocated this GPU runs on it
  kAllocatedIdle,     // allocated, but no process of an allocated job is on it
  kUnallocatedInUse,  // processes, but no allocation (non-SLURM, or a job that left its cgroup)
};
std::string_view GpuUseStateName(GpuUseState state);  // "free", "busy", ...

struct GpuJobAllocation {
  SlurmJob job;
  AllocationMethod method = AllocationMethod::kCgroupDevices;
};

struct GpuProcessUse {
  AttributedProcess process;
  // The process's job is one of this GPU's allocated jobs. False for a process of no job or of
  // another job: an intruder on an allocated GPU, or any process on an unallocated one.
  bool of_allocated_job = false;
};

struct GpuUse {
  std::string uuid;
  uint32_t index = 0;
  std::optional<uint32_t> minor;
  std::vector<GpuJobAllocation> allocated_jobs;  // several when SLURM shares the GPU (shard, MPS)
  std::vector<GpuProcessUse> processes;
  GpuUseState state = GpuUseState::kFree;
};

struct NodeGpuUse {
  std::vector<GpuUse> gpus;  // in inventory order
  // Inputs that name GPUs the inventory does not have (it changed since, or a MIG UUID): kept so
  // they are reported rather than dropped.
  std::vector<AttributedProcess> processes_on_unknown_gpus;
  std::vector<std::string> allocated_unknown_gpus;
};

// A job allocated the same GPU twice (from two sources) is listed once, with the first method.
NodeGpuUse BuildNodeGpuUse(const std::vector<gpu::GpuInfo>& inventory,
                           const std::vector<JobAllocation>& allocations,
                           const std::vector<AttributedProcess>& processes);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_GPU_VIEW_H_
