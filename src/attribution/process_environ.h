// The SLURM variables of a process's environment, from /proc/<pid>/environ. Pure.
//
// The environment is the fallback when a process's cgroup names no job: a task that daemonised
// into another cgroup, or was moved out by systemd, keeps the environment slurmstepd gave it.
// Unlike the cgroup, the environment is the process's own to change, so it only ever decides when
// the cgroup is silent, and such a process is reported as outside its job's cgroup.
//
// Variables read (SLURM's names; the PACK spellings are SLURM before 20.02):
//   SLURM_JOB_ID (or the older SLURM_JOBID)      the job's numeric id, as in its cgroup path
//   SLURM_ARRAY_JOB_ID + SLURM_ARRAY_TASK_ID      an array task, shown as "<array job>_<task>"
//   SLURM_HET_JOB_ID + SLURM_HET_JOB_OFFSET       a het component, shown as "<het job>+<offset>"
//     (SLURM_PACK_JOB_ID + SLURM_PACK_JOB_OFFSET)
//   CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS,         kept as text for allocation.h
//     SLURM_STEP_GPUS
#ifndef EXPANSE_ATTRIBUTION_PROCESS_ENVIRON_H_
#define EXPANSE_ATTRIBUTION_PROCESS_ENVIRON_H_

#include <optional>
#include <string>
#include <string_view>

#include "attribution/slurm_job.h"
#include "core/result.h"

namespace expanse::attribution {

struct SlurmEnviron {
  std::optional<SlurmJob> job;  // empty when SLURM_JOB_ID is not set
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> slurm_job_gpus;
  std::optional<std::string> slurm_step_gpus;  // what a step task's CUDA indices count over
  // CUDA_INJECTION64_PATH when it names another tool than Expanse's own agent: Nsight Systems or
  // Compute, compute-sanitizer, or a user's CUPTI injection; or "EXPANSE_YIELD_COUNTERS=1" when
  // the job asked for its GPUs' counters that way. Such a process may want the GPU's profiling
  // counters, so the counter helper lets that GPU go while it runs.
  std::optional<std::string> cuda_tool;
};

// Expanse's in-process agent, which TaskProlog injects: not a tool that competes for counters.
inline constexpr char kExpanseAgentLibrary[] = "libexpanse-agent.so";

// Parses the NUL-separated KEY=VALUE entries of an environ file. When `truncated` (the reader hit
// its byte cap) the last entry may be cut short and is dropped. The first of duplicate keys wins,
// as getenv() does. An array or het pair that is half present or not numeric leaves the display id
// at the plain job number. kInvalidArgument, reason "environ_malformed", only when SLURM_JOB_ID
// is set but is not a non-zero 32-bit number.
Result<SlurmEnviron> ParseProcessEnviron(std::string_view bytes, bool truncated);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_PROCESS_ENVIRON_H_
