// Who a captured process is: the SLURM job, step and rank it belongs to (from the variables
// slurmstepd gives every task), the host, and the process (pid and start time, which together
// name one process even after its pid is reused). Read once at injection and again in a forked
// child, whose pid differs.
#ifndef EXPANSE_CAPTURE_PROCESS_IDENTITY_H_
#define EXPANSE_CAPTURE_PROCESS_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace expanse::capture {

struct ProcessIdentity {
  std::string job_id;  // SLURM_JOB_ID; "" outside a job
  std::string step_id;
  std::string rank;  // SLURM_PROCID
  std::string host;  // short host name, as SLURM names nodes
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/self/stat field 22
  uid_t uid = 0;
};

// `getenv` is the environment lookup (std::getenv in the agent; a map in tests).
ProcessIdentity CurrentProcess(const std::function<const char*(const char*)>& getenv);

// A job id fit to appear in a file name: SLURM's digits, an array's "_" and a het job's "+".
bool SafeJobId(const std::string& job_id);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_PROCESS_IDENTITY_H_
