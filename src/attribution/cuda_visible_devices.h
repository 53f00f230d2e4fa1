// CUDA_VISIBLE_DEVICES as SLURM or a user set it. Pure.
//
// The CUDA runtime accepts a comma-separated list of either device indices or device UUIDs
// ("GPU-<uuid>", a unique prefix of one, or a MIG device "MIG-<uuid>"; drivers before R470 wrote
// MIG devices as "MIG-GPU-<gpu uuid>/<gi>/<ci>"). Indices count the devices the process can
// open: with ConstrainDevices=yes SLURM writes 0..k-1 over the job's own GPUs, so an index means
// nothing without the job's GPU list (SLURM_JOB_GPUS), see allocation.h.
#ifndef EXPANSE_ATTRIBUTION_CUDA_VISIBLE_DEVICES_H_
#define EXPANSE_ATTRIBUTION_CUDA_VISIBLE_DEVICES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::attribution {

struct CudaVisibleDevices {
  // Exactly one is non-empty, unless the value is empty (CUDA then shows no device).
  std::vector<uint32_t> indices;
  std::vector<std::string> uuids;  // as written: "GPU-...", "MIG-...", "MIG-GPU-.../1/0"
};

// Blanks around entries are ignored. Errors:
//   kFailedPrecondition, reason "no_device_files": SLURM's "NoDevFiles" marker (gres.conf gave
//     the GRES no File=, so SLURM could not name devices);
//   kInvalidArgument, reason "cuda_visible_devices_malformed": an entry that is neither a number
//     nor a GPU-/MIG- UUID, an empty entry, or indices mixed with UUIDs.
Result<CudaVisibleDevices> ParseCudaVisibleDevices(std::string_view value);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_CUDA_VISIBLE_DEVICES_H_
