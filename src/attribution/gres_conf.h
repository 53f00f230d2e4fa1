// What gres.conf says about one node's GPUs: how SLURM numbers them. Pure.
//
// SLURM_JOB_GPUS (in the Prolog and Epilog) lists GRES indices: positions in the node's list of
// gpu GRES, not NVML indices and not /dev/nvidiaN minors. The list comes from gres.conf:
//   - explicit devices: each "Name=gpu File=..." line that applies to the node adds its device
//     files, in the order written (a File= hostlist expands in order). "File=/dev/nvidia[2-3]"
//     or "File=/dev/nvidia2,/dev/nvidia3" gives GRES 0 = minor 2 and GRES 1 = minor 3. The minor
//     is the number at the end of a file named nvidia<N> (SLURM reads the same digits; NVIDIA's
//     driver creates /dev/nvidiaN with minor N). Files may live outside /dev (our test cluster
//     uses stand-in device files under its state directory).
//   - "AutoDetect=nvml" (or "nvidia"): slurmd asks the driver, and we assume GRES index order is
//     NVML index order, i.e. GPUs sorted by PCI bus id. That is what NVML enumerates and what
//     slurmd records; a site that sets CUDA_DEVICE_ORDER or reorders by Links= would break it.
// A line applies to the node when it has no NodeName= or its NodeName= hostlist contains the
// node's SLURM name (SLURMD_NODENAME, which may differ from the host name). Keys are matched
// without regard to case, as SLURM does; unknown keys are ignored; '#' starts a comment and a
// trailing '\' continues a line. "Include" lines are not followed (this code reads no files) but
// are reported, since GPU lines may hide there.
#ifndef EXPANSE_ATTRIBUTION_GRES_CONF_H_
#define EXPANSE_ATTRIBUTION_GRES_CONF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::attribution {

// gres.conf is a few kilobytes; this bounds the work on a wrong path.
inline constexpr size_t kMaxGresConfBytes = size_t{1} << 20;
// More device files than any node has; bounds File= expansion.
inline constexpr size_t kMaxGresFilesPerNode = 1024;

struct GresGpuFile {
  std::string path;  // "/dev/nvidia2"
  uint32_t minor = 0;

  friend bool operator==(const GresGpuFile& a, const GresGpuFile& b) = default;
};

struct NodeGres {
  bool auto_detect_nvidia = false;    // AutoDetect=nvml or nvidia applies to the node
  std::vector<GresGpuFile> files;     // in GRES index order
  size_t gpus_without_file = 0;       // Count= of gpu lines without File= (types for AutoDetect)
  std::vector<std::string> includes;  // Include targets not followed
};

// Errors, kInvalidArgument with "gres.conf line N: ..." and a reason:
//   "gres_conf_malformed"   a token that is not Key=Value, a bad NodeName= or File= hostlist,
//                           a File= that is not an nvidia<N> device, a duplicate file, Count=
//                           that differs from the number of files, conflicting node AutoDetect=
//   "gres_conf_unsupported" MultipleFiles= on a gpu line for this node
// kResourceExhausted, reason "gres_conf_too_large", past kMaxGresConfBytes or
// kMaxGresFilesPerNode.
Result<NodeGres> ParseGresConf(std::string_view text, std::string_view node_name);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_GRES_CONF_H_
