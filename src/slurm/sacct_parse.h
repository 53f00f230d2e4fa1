// Parsing `sacct --json -X`: jobs from the accounting database (slurmdbd), including those that
// have left slurmctld's memory, into JobInfo records.
//
// Verified on SLURM 22.05.8 (fixtures in tests/fixtures/slurm/): jobs[] with job_id, name, user,
// account, partition, nodes ("None assigned" when none), array.{job_id,task_id,task},
// het.{job_id,job_offset}, state.current (a string), time.{submission,start,end} (Unix seconds;
// end 0 while running), time.limit (minutes; null when unlimited), allocation_nodes,
// required.CPUs and tres.requested[] {type, name, count} with memory in MiB.
// Assumed for 23.02+: the number objects (see slurm_json.h) and state.current as a list.
#ifndef EXPANSE_SLURM_SACCT_PARSE_H_
#define EXPANSE_SLURM_SACCT_PARSE_H_

#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/job_info.h"

namespace expanse::slurm {

// Requested resources come from tres.requested (node, cpu, mem, gres/gpu — untyped "gpu", else
// the sum of typed "gpu:<type>"), falling back to allocation_nodes and required.CPUs, and for
// memory to 23.02's required.memory_per_node x nodes or required.memory_per_cpu x cpus (22.05's
// required.memory does not say which of the two it is, so it is not used). gpu_indices stays
// empty: sacct does not report GRES indices.
//
// Errors are kInvalidArgument, reason "slurm_output", naming the field by its full path
// ("sacct --json: jobs[0].time must be an object"); a non-empty "errors" list is
// kUnavailable, reason "slurm_error".
Result<std::vector<JobInfo>> ParseSacctJson(std::string_view text);

// Whether sacct's output says the cluster keeps no accounting (no slurmdbd). 22.05.8 prints
// "Slurm accounting storage is disabled" on stderr and exits 1, with --json too.
bool SaysAccountingDisabled(std::string_view output);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_SACCT_PARSE_H_
