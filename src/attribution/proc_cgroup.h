// Which SLURM job a process belongs to, according to its /proc/<pid>/cgroup file. Pure.
//
// slurmstepd puts every task into a cgroup named after its job and step, and the kernel shows
// that path in /proc/<pid>/cgroup, one line per hierarchy ("hierarchy-id:controllers:path"):
//
//   cgroup v1   4:devices:/slurm/uid_0/job_123/step_0/task_0
//               4:devices:/slurm_node7/uid_0/job_123/step_batch     (slurmd with its own prefix)
//               4:devices:/expanse-testcluster/worker1/slurm/uid_0/job_7/step_0/task_0
//                                                        (our test cluster, read from outside
//                                                         the worker's cgroup namespace)
//   cgroup v2   0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0
//
// The part before job_<id> depends on slurmd's configuration and on the reader's cgroup
// namespace, so the job is found as a path component "job_<digits>" wherever it sits, and the
// step as the "step_<name>" component right after it. A process cannot forge this: only root
// (or the owner of a delegated subtree) can move it between cgroups.
#ifndef EXPANSE_ATTRIBUTION_PROC_CGROUP_H_
#define EXPANSE_ATTRIBUTION_PROC_CGROUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::attribution {

// One line of /proc/<pid>/cgroup.
struct ProcCgroupLine {
  uint32_t hierarchy_id = 0;  // 0 for the cgroup v2 unified hierarchy
  std::string controllers;    // "devices", "cpu,cpuacct", "name=systemd"; empty for v2
  std::string path;           // starts with '/'
};

// Parses "hierarchy-id:controllers:path". The path is everything after the second colon (it may
// hold colons itself); the " (deleted)" suffix the kernel adds for a removed v2 cgroup is
// dropped. kInvalidArgument, reason "cgroup_malformed", for anything else.
Result<ProcCgroupLine> ParseProcCgroupLine(std::string_view line);

// A SLURM job found in a cgroup path.
struct CgroupJobPath {
  uint32_t job_id = 0;
  std::string step;        // "0", "batch", "extern", "interactive"; empty above step level
  std::string job_cgroup;  // the path up to and including job_<id>: "/slurm/uid_0/job_123"
};

// The first component "job_<id>" of `path`, the id written as SLURM prints it (a non-zero 32-bit
// number without leading zeros); nullopt when there is none. The first one wins because SLURM's
// is the outermost: a container runtime inside a job may nest cgroups we do not control.
std::optional<CgroupJobPath> FindJobInCgroupPath(std::string_view path);

// Where the whole file places the process.
struct CgroupPlacement {
  CgroupJobPath job;
  std::string controllers;  // of the line that decided; empty for v2
  int cgroup_version = 1;   // 1 or 2
};

// Reads every line and picks the job from, in order: the v1 "devices" hierarchy (it is what
// confines the GPUs), the v2 unified hierarchy, then any other v1 hierarchy. nullopt when no
// line names a job (not a SLURM task, or one that left its job's cgroups). Errors,
// kInvalidArgument: a malformed line (reason "cgroup_malformed", with its 1-based number), or
// lines naming different jobs (reason "cgroup_conflict").
Result<std::optional<CgroupPlacement>> ParseProcCgroup(std::string_view text);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_PROC_CGROUP_H_
