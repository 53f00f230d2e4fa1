#include "agent/job_devices_check.h"

#include <algorithm>
#include <cstdlib>

namespace expanse::agent {
namespace {

constexpr size_t kMaxDevicesListBytes = 64 << 10;

// The whitelist's GPUs compared with the allocation, or why they could not be.
void Judge(const telemetry::JobCgroups::JobDirs& dirs, const attribution::NodeGpus& node,
           const attribution::FileReader& reader, JobDevicesCheck& check) {
  if (dirs.devices.empty()) {
    check.state = JobDevicesState::kNotChecked;
    check.detail = dirs.v2 ? "cgroup v2 confines devices with an eBPF program; there is no "
                             "device list to read"
                           : "the job's cgroup has no devices controller (cgroup.conf's "
                             "ConstrainDevices=yes makes one)";
    return;
  }
  const std::string path = dirs.devices + "/devices.list";
  Result<attribution::CappedFile> file = reader.Read(path, kMaxDevicesListBytes);
  if (!file.ok()) {
    // The job ending between the walk and the read is not a finding.
    check.state = file.status().reason() == "gone" ? JobDevicesState::kNotChecked
                                                   : JobDevicesState::kUnreadable;
    check.detail = path + ": " + file.status().message();
    return;
  }
  if (file->truncated) {
    check.state = JobDevicesState::kUnreadable;
    check.detail = path + " holds more than 64 KiB";
    return;
  }
  Result<attribution::GpuSet> allowed = attribution::GpusFromDevicesList(file->bytes, node);
  if (!allowed.ok()) {
    const std::string& reason = allowed.status().reason();
    if (reason == "devices_default_allow") {
      // The usual case on cgroup v1 with SLURM 21.08 and later: nothing wrong, nothing to read.
      // The detail is the same for every job, so the doctor's note counts them together.
      check.state = JobDevicesState::kNotChecked;
      check.detail = allowed.status().message();
      return;
    }
    check.state = reason == "devices_unconstrained" ? JobDevicesState::kUnconstrained
                                                    : JobDevicesState::kUnreadable;
    check.detail = path + ": " + allowed.status().message();
    return;
  }
  check.cgroup_gpus = allowed->gpu_uuids;
  std::vector<std::string> a = check.allocated_gpus, b = check.cgroup_gpus;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  check.state = a == b ? JobDevicesState::kAgrees : JobDevicesState::kDisagrees;
}

}  // namespace

std::string_view JobDevicesStateName(JobDevicesState state) {
  switch (state) {
    case JobDevicesState::kAgrees:
      return "agrees";
    case JobDevicesState::kDisagrees:
      return "disagrees";
    case JobDevicesState::kUnconstrained:
      return "unconstrained";
    case JobDevicesState::kNotChecked:
      return "not_checked";
    case JobDevicesState::kUnreadable:
      return "unreadable";
  }
  return "not_checked";
}

std::vector<JobDevicesCheck> CheckJobDevices(
    const std::map<std::string, std::vector<wire::GpuAllocationRecord>>& open_allocations,
    const std::map<uint32_t, telemetry::JobCgroups::JobDirs>& job_dirs,
    const attribution::NodeGpus& node, int64_t now_ms, const attribution::FileReader& reader) {
  std::vector<JobDevicesCheck> out;
  for (const auto& [key, entries] : open_allocations) {
    if (entries.empty())
      continue;
    if (out.size() >= kMaxJobDevicesChecks)
      break;
    JobDevicesCheck check;
    check.job_id = entries.front().job_id;
    int64_t from_ms = entries.front().from_ms;
    for (const wire::GpuAllocationRecord& e : entries) {
      check.allocated_gpus.push_back(e.gpu_uuid);
      from_ms = std::max(from_ms, e.from_ms);
    }
    // The cgroup is named by SLURM's number for the job on this node (a het component's own).
    const wire::GpuAllocationRecord& first = entries.front();
    const uint32_t number =
        first.slurm_job_id > 0
            ? static_cast<uint32_t>(first.slurm_job_id)
            : static_cast<uint32_t>(std::strtoul(first.job_id.c_str(), nullptr, 10));
    if (now_ms - from_ms < kJobDevicesSettleMs) {
      check.detail = "the job started less than 15 s ago";
    } else if (auto dirs = job_dirs.find(number); dirs == job_dirs.end()) {
      check.detail = "no cgroup of job " + std::to_string(number) + " was found";
    } else {
      Judge(dirs->second, node, reader, check);
    }
    out.push_back(std::move(check));
  }
  return out;
}

nlohmann::json JobDevicesToJson(const std::vector<JobDevicesCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const JobDevicesCheck& c : checks) {
    nlohmann::json entry = {{"job_id", c.job_id},
                            {"state", JobDevicesStateName(c.state)},
                            {"allocated_gpus", c.allocated_gpus}};
    if (c.state == JobDevicesState::kAgrees || c.state == JobDevicesState::kDisagrees)
      entry["cgroup_gpus"] = c.cgroup_gpus;
    if (!c.detail.empty())
      entry["detail"] = c.detail;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace expanse::agent
