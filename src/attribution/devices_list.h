// The GPUs a cgroup v1 device whitelist lets a job open. Pure.
//
// With ConstrainDevices=yes, SLURM's task/cgroup plugin writes the job's allowed devices into
// <cgroup root>/devices/<...>/job_<id>/devices.list, which the kernel then enforces; it is the
// most trustworthy statement of a job's GPUs on a node. Lines are "<type> <major>:<minor>
// <access>" (type a, b or c; numbers or '*'; access a subset of "rwm"), e.g. "c 195:2 rwm".
// NVIDIA's character devices all have major 195: minors 0-253 are GPUs (/dev/nvidiaN), 254 is
// nvidia-modeset and 255 nvidiactl, which every CUDA process needs and which say nothing about
// the GPU. cgroup v2 has no such file (devices are filtered by an eBPF program), so on v2 the
// allocation comes from the other sources in allocation.h.
#ifndef EXPANSE_ATTRIBUTION_DEVICES_LIST_H_
#define EXPANSE_ATTRIBUTION_DEVICES_LIST_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::attribution {

inline constexpr uint32_t kNvidiaMajor = 195;
// Minors at and above this are NVIDIA control devices, not GPUs.
inline constexpr uint32_t kFirstNvidiaControlMinor = 254;

struct DeviceWhitelist {
  // True for "a *:* rwm", the kernel's whole listing of a cgroup that allows every device by
  // default: its deny entries are not listed. SLURM 21.08 and later confine a job's GPUs that
  // way under cgroup v1 (each GPU it was not given is denied), so such a list says nothing about
  // which GPUs the job may open.
  bool default_allow = false;
  // True when an entry grants every NVIDIA device ("a *:* rwm", "c 195:* rw", "c *:* rw").
  bool all_gpus = false;
  std::vector<uint32_t> gpu_minors;  // ascending, unique; only entries granting r or w
};

// kInvalidArgument, reason "devices_list_malformed", with the 1-based line, for a line that is
// not "<a|b|c> <major|*>:<minor|*> <rwm>".
Result<DeviceWhitelist> ParseDevicesList(std::string_view text);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_DEVICES_LIST_H_
