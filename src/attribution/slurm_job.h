// SlurmJob: how the attribution module names a SLURM job.
//
// SLURM gives every job, every array task and every heterogeneous-job component its own
// numeric id; that id is what slurmstepd writes into cgroup paths (job_<id>) and into
// SLURM_JOB_ID. Users know array tasks and het components by another name ("123_4",
// "123+1"), which only the process environment reveals. Attribution matches on the numeric id
// and carries the display id alongside.
#ifndef EXPANSE_ATTRIBUTION_SLURM_JOB_H_
#define EXPANSE_ATTRIBUTION_SLURM_JOB_H_

#include <cstdint>
#include <string>

namespace expanse::attribution {

struct SlurmJob {
  uint32_t job_id = 0;     // never 0 for a real job
  std::string display_id;  // "123_4" (array task), "123+1" (het component), else "<job_id>"

  friend bool operator==(const SlurmJob& a, const SlurmJob& b) = default;
};

// A job known only by its numeric id (from a cgroup path): display_id is the number.
SlurmJob JobFromNumber(uint32_t job_id);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_SLURM_JOB_H_
