// Parsing `scontrol show job -d [<id>]`: which GPUs (GRES indices) a job holds on each host.
// scontrol has no --json on 22.05 ("unrecognized option '--json'", verified on 22.05.8), so this
// reads its text, as printed by src/api/job_info.c slurm_sprint_job_info():
//
//   JobId=9 ArrayJobId=4 ArrayTaskId=0 JobName=arr        <- a record starts here
//      JobState=RUNNING Reason=None Dependency=(null)
//      ...
//      JOB_GRES=gpu:1
//        Nodes=worker[1-2] CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)   <- per group of hosts
//
// Records are separated by blank lines; an array job's id prints all its tasks and a het job's
// id all its components. Hosts with the same layout share one "Nodes=" line, a host list.
// scontrol does not escape values, so a job name holding a newline could forge lines; squeue
// --json's gres_detail (JobInfo::gpu_indices) carries the same facts escaped, prefer it where
// present.
#ifndef EXPANSE_SLURM_SCONTROL_PARSE_H_
#define EXPANSE_SLURM_SCONTROL_PARSE_H_

#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/job_info.h"

namespace expanse::slurm {

// The records in order. Errors are kInvalidArgument, reason "slurm_output", with the line:
//   scontrol show job: line 22: GRES "gpu:2(IDX:0-x)": ...
Result<std::vector<JobGres>> ParseScontrolShowJob(std::string_view text);

// Whether scontrol's output says the job does not exist ("Invalid job id specified").
bool SaysInvalidJobId(std::string_view output);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_SCONTROL_PARSE_H_
