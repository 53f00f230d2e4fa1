// JobCudaTools: which running jobs on this node run another CUDA tool, read from the
// environments of the processes in each job's cgroup (process_environ.h: a CUDA_INJECTION64_PATH
// that is not Expanse's agent — Nsight Systems or Compute, compute-sanitizer, a user's CUPTI
// injection — or EXPANSE_YIELD_COUNTERS=1).
//
// Why the cgroup and not NVML's process list: a process appears in NVML's list once it has a
// CUDA context, and ncu or nsys profile from its first kernels, milliseconds later; the list is
// read at each collection, seconds apart. A job's processes are in its cgroup from exec, before
// the seconds it takes to import a framework and create a context, so read at every fast tick
// (1 s) the counter helper lets the job's GPUs go before the tool asks for the counters.
//
// Cost: one cgroup.procs read per job (telemetry/job_cgroups.h) and an environ read per new
// process, a second one a tick later (one caught between fork and exec), and one every
// `recheck_ms` after (an exec in place, `bash -c 'export ...; exec python'`, gives it a new
// environment under the same pid); at most `max_reads` reads and `max_bytes` bytes per scan,
// so a job with thousands of processes and huge environments waits its turn, never stalls
// the GPU sampling on the same thread.
#ifndef EXPANSE_AGENT_JOB_CUDA_TOOLS_H_
#define EXPANSE_AGENT_JOB_CUDA_TOOLS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "attribution/process_attribution.h"

namespace expanse::agent {

struct JobCudaToolsBudget {
  size_t max_reads = 256;
  uint64_t max_bytes = 8 << 20;
};

class JobCudaTools {
 public:
  explicit JobCudaTools(attribution::AttributionOptions options, int64_t recheck_ms = 10'000,
                        JobCudaToolsBudget budget = {})
      : options_(std::move(options)), recheck_ms_(recheck_ms), budget_(budget) {}

  // `pids`: each running job's processes now. Returns the jobs one of whose processes runs
  // another CUDA tool. A process whose environment cannot be read (gone, denied) runs none.
  std::set<uint32_t> Scan(int64_t now_ms, const std::map<uint32_t, std::vector<int>>& pids);

 private:
  struct Seen {
    int64_t read_ms = 0;
    bool tool = false;
    int reads = 0;
  };
  std::optional<bool> RunsTool(int pid, uint64_t* bytes) const;

  attribution::AttributionOptions options_;
  int64_t recheck_ms_;
  JobCudaToolsBudget budget_;
  std::map<int, Seen> seen_;  // the processes of the last scan
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_JOB_CUDA_TOOLS_H_
