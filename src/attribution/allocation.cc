#include "attribution/allocation.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "attribution/cuda_visible_devices.h"
#include "attribution/devices_list.h"
#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

// Positions into node.inventory that a source selected; turned into a GpuSet at the end so every
// method reports GPUs in inventory order.
class Selection {
 public:
  explicit Selection(const NodeGpus& node) : node_(node), chosen_(node.inventory.size(), false) {}

  void Add(size_t position) { chosen_[position] = true; }

  GpuSet Finish(AllocationMethod method) const {
    GpuSet set;
    set.method = method;
    for (size_t i = 0; i < chosen_.size(); ++i) {
      if (chosen_[i]) {
        set.gpu_uuids.push_back(node_.inventory[i].uuid);
      }
    }
    return set;
  }

 private:
  const NodeGpus& node_;
  std::vector<bool> chosen_;
};

Result<size_t> PositionOfMinor(const NodeGpus& node, uint32_t minor, std::string_view source) {
  size_t without_minor = 0;
  for (size_t i = 0; i < node.inventory.size(); ++i) {
    if (!node.inventory[i].minor) {
      ++without_minor;
    } else if (*node.inventory[i].minor == minor) {
      return i;
    }
  }
  std::string message = std::string(source) + " names /dev/nvidia" + std::to_string(minor) +
                        ", but no GPU in the inventory has minor " + std::to_string(minor);
  if (without_minor > 0) {
    return FailedPreconditionError(message + " (" + std::to_string(without_minor) +
                                   " GPUs have no known minor number)")
        .WithReason("inventory_without_minor");
  }
  return FailedPreconditionError(message).WithReason("unknown_gpu_minor");
}

std::string ToLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c + 32);
    }
  }
  return lower;
}

// Inventory positions in PCI bus order: the order AutoDetect gives GRES indices (gres_conf.h).
std::vector<size_t> PciOrder(const NodeGpus& node) {
  std::vector<size_t> order(node.inventory.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const gpu::GpuInfo& x = node.inventory[a];
    const gpu::GpuInfo& y = node.inventory[b];
    return std::pair(ToLower(x.pci_bus_id), x.index) < std::pair(ToLower(y.pci_bus_id), y.index);
  });
  return order;
}

Result<std::vector<uint32_t>> ParseGresIndices(std::string_view text) {
  const std::string_view trimmed = internal::TrimBlank(text);
  std::vector<uint32_t> indices;
  if (trimmed.empty()) {
    return indices;
  }
  if (trimmed == "NoDevFiles") {
    return FailedPreconditionError(
               "SLURM_JOB_GPUS=\"NoDevFiles\": gres.conf gives the GPUs no File=, so SLURM could "
               "not number them")
        .WithReason("no_device_files");
  }
  for (const std::string_view item : internal::Split(trimmed, ',')) {
    const std::optional<uint32_t> index = internal::ParseDecimalU32(internal::TrimBlank(item));
    if (!index) {
      return InvalidArgumentError("SLURM_JOB_GPUS=" + QuoteForMessage(text) + ": " +
                                  QuoteForMessage(item) + " is not a GRES index")
          .WithReason("job_gpus_malformed");
    }
    indices.push_back(*index);
  }
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

// Inventory positions of the GRES indices, in ascending GRES order.
Result<std::vector<size_t>> PositionsOfGres(const std::vector<uint32_t>& indices,
                                            const NodeGpus& node) {
  std::vector<size_t> positions;
  if (node.gres.auto_detect_nvidia) {
    const std::vector<size_t> order = PciOrder(node);
    for (const uint32_t index : indices) {
      if (index >= order.size()) {
        return FailedPreconditionError("SLURM_JOB_GPUS names GRES index " + std::to_string(index) +
                                       ", but AutoDetect finds " + std::to_string(order.size()) +
                                       " GPUs on this node")
            .WithReason("gres_index_out_of_range");
      }
      positions.push_back(order[index]);
    }
    return positions;
  }
  const std::vector<GresGpuFile>& files = node.gres.files;
  if (files.empty() || node.gres.gpus_without_file > 0) {
    if (indices.empty()) {
      return positions;
    }
    return FailedPreconditionError(
               files.empty() ? "gres.conf gives this node no gpu device files and no "
                               "AutoDetect=nvml, so GRES indices name no GPU"
                             : "gres.conf gives this node gpu lines with and without File=, so "
                               "GRES indices are ambiguous")
        .WithReason("gres_without_files");
  }
  for (const uint32_t index : indices) {
    if (index >= files.size()) {
      return FailedPreconditionError("SLURM_JOB_GPUS names GRES index " + std::to_string(index) +
                                     ", but gres.conf gives this node " +
                                     std::to_string(files.size()) + " gpu device files")
          .WithReason("gres_index_out_of_range");
    }
    EXPANSE_ASSIGN_OR_RETURN(const size_t position,
                             PositionOfMinor(node, files[index].minor,
                                             "gres.conf (GRES index " + std::to_string(index) +
                                                 ", " + QuoteForMessage(files[index].path) + ")"));
    positions.push_back(position);
  }
  return positions;
}

Result<size_t> PositionOfUuid(const NodeGpus& node, std::string_view written) {
  std::string gpu_uuid(written);
  if (written.starts_with("MIG-GPU-")) {
    // Before R470: "MIG-GPU-<gpu uuid>/<gi>/<ci>" names its GPU itself.
    gpu_uuid = std::string(written.substr(4, written.find('/') - 4));
  } else if (written.starts_with("MIG-")) {
    const auto parent = node.mig_parents.find(std::string(written));
    if (parent == node.mig_parents.end()) {
      return FailedPreconditionError("CUDA_VISIBLE_DEVICES names MIG device " +
                                     QuoteForMessage(written) +
                                     ", whose GPU this node's MIG table does not list")
          .WithReason("unknown_mig_device");
    }
    gpu_uuid = parent->second;
  }
  // CUDA accepts any unique prefix of a UUID; an exact match is a prefix too.
  const std::string wanted = ToLower(gpu_uuid);
  std::optional<size_t> found;
  for (size_t i = 0; i < node.inventory.size(); ++i) {
    const std::string uuid = ToLower(node.inventory[i].uuid);
    if (uuid == wanted) {
      return i;
    }
    if (uuid.starts_with(wanted)) {
      if (found) {
        return FailedPreconditionError("CUDA_VISIBLE_DEVICES entry " + QuoteForMessage(written) +
                                       " fits more than one GPU")
            .WithReason("ambiguous_gpu_uuid");
      }
      found = i;
    }
  }
  if (!found) {
    return FailedPreconditionError("CUDA_VISIBLE_DEVICES names " + QuoteForMessage(written) +
                                   ", which no GPU in the inventory has")
        .WithReason("unknown_gpu_uuid");
  }
  return *found;
}

std::string Join(const std::vector<std::string>& uuids) {
  if (uuids.empty()) {
    return "no GPU";
  }
  std::string joined;
  for (const std::string& uuid : uuids) {
    joined += (joined.empty() ? "" : ",") + uuid;
  }
  return joined;
}

std::string_view SourceName(AllocationMethod method) {
  switch (method) {
    case AllocationMethod::kCgroupDevices:
      return "the cgroup devices.list";
    case AllocationMethod::kSlurmJobGpus:
      return "SLURM_JOB_GPUS";
    case AllocationMethod::kCudaVisibleUuids:
    case AllocationMethod::kCudaVisibleIndices:
      return "CUDA_VISIBLE_DEVICES";
  }
  return "?";
}

Status ForJob(const SlurmJob& job, const Status& status) {
  return Status(status.code(), "job " + job.display_id + ": " + status.message())
      .WithReason(status.reason());
}

}  // namespace

std::string_view AllocationMethodName(AllocationMethod method) {
  switch (method) {
    case AllocationMethod::kCgroupDevices:
      return "cgroup_devices";
    case AllocationMethod::kSlurmJobGpus:
      return "slurm_job_gpus";
    case AllocationMethod::kCudaVisibleUuids:
      return "cuda_visible_devices_uuid";
    case AllocationMethod::kCudaVisibleIndices:
      return "cuda_visible_devices_index";
  }
  return "unknown";
}

Result<GpuSet> GpusFromDevicesList(std::string_view devices_list, const NodeGpus& node) {
  EXPANSE_ASSIGN_OR_RETURN(const DeviceWhitelist whitelist, ParseDevicesList(devices_list));
  if (whitelist.default_allow) {
    return FailedPreconditionError(
               "devices.list is \"a *:* rwm\": the cgroup allows every device by default and "
               "the kernel does not list the devices it denies (SLURM 21.08 and later deny a "
               "job the GPUs it was not given this way)")
        .WithReason("devices_default_allow");
  }
  if (whitelist.all_gpus) {
    return FailedPreconditionError(
               "devices.list grants every NVIDIA device, so the job cgroup does not confine "
               "GPUs (ConstrainDevices=no, or not a job cgroup)")
        .WithReason("devices_unconstrained");
  }
  Selection selection(node);
  for (const uint32_t minor : whitelist.gpu_minors) {
    EXPANSE_ASSIGN_OR_RETURN(const size_t position, PositionOfMinor(node, minor, "devices.list"));
    selection.Add(position);
  }
  return selection.Finish(AllocationMethod::kCgroupDevices);
}

Result<GpuSet> GpusFromJobGpus(std::string_view gres_indices, const NodeGpus& node) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<uint32_t> indices, ParseGresIndices(gres_indices));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<size_t> positions, PositionsOfGres(indices, node));
  Selection selection(node);
  for (const size_t position : positions) {
    selection.Add(position);
  }
  return selection.Finish(AllocationMethod::kSlurmJobGpus);
}

Result<GpuSet> GpusFromCudaVisibleDevices(std::string_view cuda_visible_devices,
                                          std::optional<std::string_view> gres_indices,
                                          const NodeGpus& node) {
  EXPANSE_ASSIGN_OR_RETURN(const CudaVisibleDevices devices,
                           ParseCudaVisibleDevices(cuda_visible_devices));
  Selection selection(node);
  if (!devices.uuids.empty()) {
    for (const std::string& uuid : devices.uuids) {
      EXPANSE_ASSIGN_OR_RETURN(const size_t position, PositionOfUuid(node, uuid));
      selection.Add(position);
    }
    return selection.Finish(AllocationMethod::kCudaVisibleUuids);
  }
  if (devices.indices.empty()) {
    return selection.Finish(AllocationMethod::kCudaVisibleIndices);
  }
  if (!gres_indices) {
    return FailedPreconditionError("CUDA_VISIBLE_DEVICES=" + QuoteForMessage(cuda_visible_devices) +
                                   " holds indices, which count the job's own devices; without "
                                   "SLURM_JOB_GPUS they name no GPU")
        .WithReason("cuda_visible_devices_needs_job_gpus");
  }
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<uint32_t> gres, ParseGresIndices(*gres_indices));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<size_t> positions, PositionsOfGres(gres, node));
  for (const uint32_t local : devices.indices) {
    if (local >= positions.size()) {
      return FailedPreconditionError("CUDA_VISIBLE_DEVICES index " + std::to_string(local) +
                                     " is past the " + std::to_string(positions.size()) +
                                     " GPUs of SLURM_JOB_GPUS=" + QuoteForMessage(*gres_indices))
          .WithReason("cuda_visible_index_out_of_range");
    }
    selection.Add(positions[local]);
  }
  return selection.Finish(AllocationMethod::kCudaVisibleIndices);
}

Result<ResolvedAllocation> ResolveAllocation(const AllocationEvidence& evidence,
                                             const NodeGpus& node) {
  struct Attempt {
    Result<GpuSet> result;
    bool may_be_subset = false;  // CUDA_VISIBLE_DEVICES may show a step fewer GPUs
  };
  std::vector<Attempt> attempts;
  if (evidence.devices_list) {
    attempts.push_back({GpusFromDevicesList(*evidence.devices_list, node)});
  }
  if (evidence.slurm_job_gpus) {
    attempts.push_back({GpusFromJobGpus(*evidence.slurm_job_gpus, node)});
  }
  if (evidence.cuda_visible_devices) {
    std::optional<std::string_view> gres_indices;
    if (evidence.slurm_job_gpus) {
      gres_indices = *evidence.slurm_job_gpus;
    }
    attempts.push_back(
        {GpusFromCudaVisibleDevices(*evidence.cuda_visible_devices, gres_indices, node), true});
  }
  if (attempts.empty()) {
    return NotFoundError("job " + evidence.job.display_id +
                         ": no devices.list, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES to tell its "
                         "GPUs")
        .WithReason("no_allocation_evidence");
  }
  const auto chosen = std::find_if(attempts.begin(), attempts.end(),
                                   [](const Attempt& attempt) { return attempt.result.ok(); });
  if (chosen == attempts.end()) {
    return ForJob(evidence.job, attempts.front().result.status());
  }
  ResolvedAllocation resolved;
  resolved.allocation =
      JobAllocation{evidence.job, chosen->result->gpu_uuids, chosen->result->method};
  const std::vector<std::string>& chosen_uuids = chosen->result->gpu_uuids;
  for (auto attempt = attempts.begin(); attempt != attempts.end(); ++attempt) {
    if (attempt == chosen) {
      continue;
    }
    if (!attempt->result.ok()) {
      resolved.problems.push_back(ForJob(evidence.job, attempt->result.status()));
      continue;
    }
    const std::vector<std::string>& uuids = attempt->result->gpu_uuids;
    const bool agrees =
        attempt->may_be_subset
            ? std::all_of(uuids.begin(), uuids.end(),
                          [&](const std::string& uuid) {
                            return std::find(chosen_uuids.begin(), chosen_uuids.end(), uuid) !=
                                   chosen_uuids.end();
                          })
            : uuids == chosen_uuids;
    if (!agrees) {
      resolved.problems.push_back(
          FailedPreconditionError(
              "job " + evidence.job.display_id + ": " +
              std::string(SourceName(attempt->result->method)) + " gives " + Join(uuids) + " but " +
              std::string(SourceName(chosen->result->method)) + " gives " + Join(chosen_uuids) +
              "; using " + std::string(SourceName(chosen->result->method)))
              .WithReason("allocation_sources_disagree"));
    }
  }
  return resolved;
}

}  // namespace expanse::attribution
