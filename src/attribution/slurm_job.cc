#include "attribution/slurm_job.h"

namespace expanse::attribution {

SlurmJob JobFromNumber(uint32_t job_id) { return SlurmJob{job_id, std::to_string(job_id)}; }

}  // namespace expanse::attribution
