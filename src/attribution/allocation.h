// Which GPUs of this node SLURM allocated to a job. Pure.
//
// Three sources, in order of trust:
//   (a) the job cgroup's device whitelist (cgroup v1 devices.list, devices_list.h): what the
//       kernel lets the job open. Minor numbers, mapped to GPUs by the inventory's minor.
//   (b) SLURM_JOB_GPUS as the Prolog/Epilog saw it: GRES indices (recent SLURM releases write the
//       GRES index there; older ones wrote the number in the device file's name), mapped to
//       device files by gres.conf (gres_conf.h), then to GPUs by minor, or with AutoDetect to the
//       inventory in PCI bus order.
//   (c) CUDA_VISIBLE_DEVICES: UUIDs map straight to GPUs. Indices count the devices the job's
//       cgroup exposes (ConstrainDevices=yes makes them 0..k-1 over the allocated GRES in
//       ascending order), so they are only used together with the GRES list of (b).
// The NVML index never takes part: it follows PCI order, while SLURM and the cgroup speak of
// minor numbers and GRES indices, and on many nodes these differ.
//
// Each source alone resolves or fails with a specific error. ResolveAllocation takes the most
// trusted source that resolves, and reports the others that failed or disagree, so a wrong
// gres.conf is seen rather than silently believed or silently ignored.
#ifndef EXPANSE_ATTRIBUTION_ALLOCATION_H_
#define EXPANSE_ATTRIBUTION_ALLOCATION_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/gres_conf.h"
#include "attribution/slurm_job.h"
#include "core/result.h"
#include "core/status.h"
#include "gpu/backend.h"

namespace expanse::attribution {

enum class AllocationMethod {
  kCgroupDevices,       // (a)
  kSlurmJobGpus,        // (b)
  kCudaVisibleUuids,    // (c) with UUIDs
  kCudaVisibleIndices,  // (c) with indices over a GRES list
};

// "cgroup_devices", "slurm_job_gpus", "cuda_visible_devices_uuid", "cuda_visible_devices_index".
std::string_view AllocationMethodName(AllocationMethod method);

// The node as allocation needs it.
struct NodeGpus {
  std::vector<gpu::GpuInfo> inventory;
  NodeGres gres;  // ParseGresConf for this node; default (nothing) without a gres.conf
  std::map<std::string, std::string> mig_parents;  // MIG device UUID -> its GPU's UUID, if known
};

struct GpuSet {
  std::vector<std::string> gpu_uuids;  // in inventory order, unique
  AllocationMethod method = AllocationMethod::kCgroupDevices;
};

// (a) from the text of devices.list. Errors: the parser's; kFailedPrecondition, reason
// "devices_default_allow", for a default-allow cgroup ("a *:* rwm", whose deny entries the
// kernel does not show), and reason "devices_unconstrained" when a list of allowed devices
// grants every NVIDIA device; kFailedPrecondition, reason
// "unknown_gpu_minor" (or "inventory_without_minor" when the inventory lacks minors), for a minor
// no GPU has.
Result<GpuSet> GpusFromDevicesList(std::string_view devices_list, const NodeGpus& node);

// (b) from a GRES index list such as SLURM_JOB_GPUS ("0,1"; empty means none). Errors:
// kInvalidArgument, reason "job_gpus_malformed"; kFailedPrecondition, reason
// "gres_index_out_of_range" (an index past the node's gpu GRES), "gres_without_files" (gres.conf
// gives this node no device files and no AutoDetect), "no_device_files" ("NoDevFiles"), and the
// minor errors of GpusFromDevicesList.
Result<GpuSet> GpusFromJobGpus(std::string_view gres_indices, const NodeGpus& node);

// (c) `gres_indices` is the list the CUDA indices count over: SLURM_JOB_GPUS in the Prolog,
// Epilog or batch step, SLURM_STEP_GPUS in an srun step's task; nullopt when unknown. Errors:
// ParseCudaVisibleDevices's; kFailedPrecondition with reason "unknown_gpu_uuid",
// "ambiguous_gpu_uuid" (a prefix that fits several GPUs), "unknown_mig_device",
// "cuda_visible_devices_needs_job_gpus" (indices without a GRES list) or
// "cuda_visible_index_out_of_range"; and GpusFromJobGpus's for the GRES list.
Result<GpuSet> GpusFromCudaVisibleDevices(std::string_view cuda_visible_devices,
                                          std::optional<std::string_view> gres_indices,
                                          const NodeGpus& node);

// What is known about one job's allocation on this node; any field may be missing, e.g. a hook
// event brings SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES, a cgroup scan brings devices.list.
struct AllocationEvidence {
  SlurmJob job;
  std::optional<std::string> devices_list;          // text of the job cgroup's devices.list
  std::optional<std::string> slurm_job_gpus;        // as the Prolog saw it
  std::optional<std::string> cuda_visible_devices;  // job-level, as the Prolog saw it
};

struct JobAllocation {
  SlurmJob job;
  std::vector<std::string> gpu_uuids;  // in inventory order
  AllocationMethod method = AllocationMethod::kCgroupDevices;
};

struct ResolvedAllocation {
  JobAllocation allocation;
  // One status per other source present that failed, does not confine GPUs, or disagrees with
  // the chosen one (kFailedPrecondition, reason "allocation_sources_disagree"; CUDA_VISIBLE_DEVICES
  // disagrees only when it names a GPU outside the chosen set, since a step may see fewer).
  std::vector<Status> problems;
};

// Messages start "job <display id>: ". Errors: kNotFound, reason "no_allocation_evidence", when
// no source is present; otherwise, when none resolves, the most trusted source's error.
Result<ResolvedAllocation> ResolveAllocation(const AllocationEvidence& evidence,
                                             const NodeGpus& node);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_ALLOCATION_H_
