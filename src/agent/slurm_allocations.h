// GPU allocations from SLURM's own record, for jobs whose hooks never reported them: jobs that
// were already running when the daemon was installed, or nodes whose Prolog is not wired (the
// operator applies the hook wiring later, or never). squeue --json's gres_detail gives each
// running job's GRES indices per host, in the same round the controller already makes; they
// are mapped to GPUs exactly as the Prolog's SLURM_JOB_GPUS is (gres.conf, then the host's
// inventory by minor number), never by NVML index.
//
// Hooks stay the primary source (exact per-node start and end); this only fills gaps. The
// server merges allocations of the same (job, host, GPU), so one reported by both is stored
// once.
#ifndef EXPANSE_AGENT_SLURM_ALLOCATIONS_H_
#define EXPANSE_AGENT_SLURM_ALLOCATIONS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/backend.h"
#include "slurm/job_info.h"
#include "wire/records.h"

namespace expanse::agent {

class SlurmAllocationFallback {
 public:
  // A job that starts while the daemon runs gets this long for its hooks to report its
  // allocation before SLURM's record is used instead (the Prolog's event travels through a
  // worker's spool first). A job already running when the daemon started gets no grace: its
  // hooks ran before anyone was listening, or not at all.
  static constexpr int64_t kHookGraceMs = 60'000;

  // `gres_conf` is the cluster's gres.conf text ("" if none: indices are then taken as minors,
  // SLURM's own default when gres.conf lists no files); `started_ms` when the daemon started.
  SlurmAllocationFallback(std::string gres_conf, int64_t started_ms)
      : gres_conf_(std::move(gres_conf)), started_ms_(started_ms) {}

  // Allocations that arrived from hooks (ingest gpu_allocations entries, after job renaming).
  void NoteHookAllocations(const std::vector<wire::GpuAllocationRecord>& allocations);

  // New ingest gpu_allocations entries: running jobs' hosts with neither a hook allocation nor an
  // earlier fallback one (past the grace), and the closing of fallback allocations whose job is
  // no longer running. `inventories` maps a host to its GPUs (workers' health reports, the
  // controller's own). Hosts whose inventory is unknown are retried next round. Problems (a
  // GRES index gres.conf does not have) go to `problems`.
  std::vector<wire::GpuAllocationRecord> Reconcile(
      const std::vector<slurm::JobInfo>& jobs,
      const std::map<std::string, std::vector<gpu::GpuInfo>>& inventories, int64_t now_ms,
      std::vector<std::string>* problems);

 private:
  std::string gres_conf_;
  int64_t started_ms_ = 0;
  std::set<std::string> hooked_;  // "host/job"
  // "host/job" -> the allocations we opened
  std::map<std::string, std::vector<wire::GpuAllocationRecord>> opened_;
  // "host/job" of running jobs whose GPUs could not be resolved, with the problem last
  // reported for each: reported again only when it changes.
  std::map<std::string, std::string> failed_;

  void Problem(const std::string& key, std::string message, std::vector<std::string>* problems);
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SLURM_ALLOCATIONS_H_
