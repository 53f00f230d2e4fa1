// The node's attribution self-check (`expanse doctor`, docs/formats/doctor.md): for each running
// job whose Prolog recorded GPUs, the GPUs the job's cgroup v1 device whitelist lets it open
// (what the kernel enforces with ConstrainDevices=yes) against the GPUs SLURM_JOB_GPUS and
// CUDA_VISIBLE_DEVICES named (resolved through gres.conf when the Prolog ran). A wrong gres.conf
// File= line or a device added to a job's cgroup by hand shows here as a disagreement that names
// the GPUs. The list is readable only where the job's cgroup allows listed devices and denies the
// rest (SLURM before 21.08, or a site whose parent cgroup denies by default); SLURM 21.08 and
// later instead deny a job's other GPUs in a cgroup that allows by default, whose deny entries
// the kernel does not list ("a *:* rwm"), and cgroup v2 filters devices with an eBPF program:
// such jobs are reported as not checked, with the reason. The sampler puts the result in its
// health report (`job_devices`, docs/formats/spool.md); the third source, NVML's process list, is
// checked beside it from `gpu_use`.
#ifndef EXPANSE_AGENT_JOB_DEVICES_CHECK_H_
#define EXPANSE_AGENT_JOB_DEVICES_CHECK_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attribution/allocation.h"
#include "attribution/file_reader.h"
#include "telemetry/job_cgroups.h"
#include "wire/records.h"

namespace expanse::agent {

enum class JobDevicesState {
  kAgrees,         // the whitelist allows exactly the allocated GPUs
  kDisagrees,      // it allows GPUs the job was not given, or not all it was given
  kUnconstrained,  // a list of allowed devices that grants every NVIDIA device
  // Nothing to compare with: a default-allow cgroup (SLURM 21.08+ denies the other GPUs, and the
  // kernel lists no deny entry), cgroup v2, no devices cgroup, a job that just started.
  kNotChecked,
  kUnreadable,  // the list could not be read or parsed, or names a GPU the node lacks
};

// "agrees", "disagrees", "unconstrained", "not_checked", "unreadable".
std::string_view JobDevicesStateName(JobDevicesState state);

struct JobDevicesCheck {
  std::string job_id;                       // as the hooks named it ("123_4", "123+1", "123")
  std::vector<std::string> allocated_gpus;  // UUIDs, from the Prolog
  JobDevicesState state = JobDevicesState::kNotChecked;
  std::vector<std::string> cgroup_gpus;  // UUIDs devices.list allows (agrees, disagrees)
  std::string detail;                    // not_checked, unreadable: why, in words
};

// slurmstepd writes the job's whitelist after the Prolog ran; a job younger than this is not
// judged yet.
inline constexpr int64_t kJobDevicesSettleMs = 15'000;
// A heartbeat-sized bound whatever runs on the node.
inline constexpr size_t kMaxJobDevicesChecks = 64;

// `open_allocations`: the collector's "<host>/<job id>" -> the GPU allocations of jobs still
// running here; `job_dirs`: JobCgroups::jobs(). Jobs in the order of `open_allocations`, at
// most kMaxJobDevicesChecks.
std::vector<JobDevicesCheck> CheckJobDevices(
    const std::map<std::string, std::vector<wire::GpuAllocationRecord>>& open_allocations,
    const std::map<uint32_t, telemetry::JobCgroups::JobDirs>& job_dirs,
    const attribution::NodeGpus& node, int64_t now_ms,
    const attribution::FileReader& reader = attribution::SystemFileReader());

// [{"job_id", "state", "allocated_gpus": [...], "cgroup_gpus": [...], "detail"}]; the last two
// only when they say something.
nlohmann::json JobDevicesToJson(const std::vector<JobDevicesCheck>& checks);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_JOB_DEVICES_CHECK_H_
