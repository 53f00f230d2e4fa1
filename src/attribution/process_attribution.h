// Which SLURM job each GPU process belongs to. Reads /proc (under an injectable root).
//
// For every process NVML reports, the job comes from:
//   1. /proc/<pid>/cgroup (proc_cgroup.h): the job_<id> cgroup slurmstepd put the task in. The
//      kernel keeps it, the process cannot fake it, so when it names a job it decides.
//   2. /proc/<pid>/environ (process_environ.h): SLURM_JOB_ID and friends, when the cgroup names no
//      job. Such a process carries a job's environment but has left the job's cgroups (it
//      daemonised, or systemd moved it), yet still holds a GPU: it is reported with
//      outside_cgroup set, for the operator to see, not silently counted as the job's.
// The environment is read in either case, when permitted, for the array or het display id and
// CUDA_VISIBLE_DEVICES. Processes come and go between NVML's list and our reads: one that is gone
// (ENOENT, ESRCH) is skipped, not an error. Another user's environ needs root or CAP_SYS_PTRACE;
// without it that source is skipped and counted. A pid of 0 (NVML's answer for a process in a pid
// namespace it cannot see into) is kept, attributed to no job.
#ifndef EXPANSE_ATTRIBUTION_PROCESS_ATTRIBUTION_H_
#define EXPANSE_ATTRIBUTION_PROCESS_ATTRIBUTION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/file_reader.h"
#include "attribution/slurm_job.h"
#include "gpu/backend.h"

namespace expanse::attribution {

struct AttributionOptions {
  std::string proc_root = "/proc";
  // Environments of a few kilobytes are usual; module systems can push them near 1 MiB. A
  // larger one is read in part (counted), so a SLURM variable past the cap may be missed.
  size_t max_environ_bytes = size_t{1} << 20;
  size_t max_cgroup_bytes = size_t{64} * 1024;
  const FileReader* reader = nullptr;  // null: SystemFileReader()
};

enum class JobSource { kNone, kCgroup, kEnviron };
std::string_view JobSourceName(JobSource source);  // "none", "cgroup", "environ"

struct AttributedProcess {
  gpu::GpuProcess process;      // as NVML reported it: pid, GPU UUID, memory
  std::optional<SlurmJob> job;  // empty: not a SLURM task, as far as we can tell
  JobSource source = JobSource::kNone;
  bool outside_cgroup = false;  // the environment names the job, the cgroup does not
  std::string step;             // from the cgroup path: "0", "batch", "extern"; may be empty
  std::string job_cgroup;       // "/slurm/uid_0/job_7": where the job's devices.list lives
  // From the environment, when readable. SLURM_JOB_GPUS is set in batch and interactive steps; it
  // is the allocation evidence on cgroup v2, where no devices.list exists. A step task's CUDA
  // indices count the step's GPUs, not the job's (allocation.h).
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> slurm_job_gpus;
  std::optional<std::string> cuda_tool;  // process_environ.h: another CUDA tool is injected
};

// Counted rather than logged: they recur every sample.
struct AttributionCounters {
  uint64_t processes_gone = 0;      // vanished before we could read them (distinct pids)
  uint64_t cgroup_unreadable = 0;   // cgroup file could not be read for another reason
  uint64_t cgroup_malformed = 0;    // or was not understood (ParseProcCgroup failed)
  uint64_t environ_denied = 0;      // permission denied: run as root or with CAP_SYS_PTRACE
  uint64_t environ_unreadable = 0;  // other read errors
  uint64_t environ_truncated = 0;   // longer than max_environ_bytes
  uint64_t environ_malformed = 0;   // SLURM_JOB_ID not a job id

  friend bool operator==(const AttributionCounters& a, const AttributionCounters& b) = default;
};

struct ProcessAttributionResult {
  std::vector<AttributedProcess> processes;  // in input order, without vanished ones
  AttributionCounters counters;
};

// Reads each distinct pid once, even when it holds several GPUs.
ProcessAttributionResult AttributeProcesses(const std::vector<gpu::GpuProcess>& processes,
                                            const AttributionOptions& options);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_PROCESS_ATTRIBUTION_H_
