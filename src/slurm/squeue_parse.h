// Parsing `squeue --json`: every job slurmctld knows, in one call, into JobInfo records.
//
// Verified on SLURM 22.05.8 (openapi/v0.0.38; fixtures in tests/fixtures/slurm/): jobs[] with
// job_id, array_job_id/array_task_id/array_task_string, het_job_id/het_job_offset, name,
// user_name, account, partition, job_state (one string), nodes, submit/start/end_time (Unix
// seconds), node_count, cpus, tasks, memory_per_node/memory_per_cpu (MiB; null when not set),
// time_limit (minutes; null when unlimited), tres_per_job/node/task, tres_req_str, gres_detail
// and job_resources.allocated_nodes[].nodename. Finished jobs stay listed for MinJobAge.
// Assumed from 23.02+ output seen elsewhere: the number objects (see slurm_json.h), job_state as
// a list in 23.11+, "gres/gpu:N" in tres_per_*.
#ifndef EXPANSE_SLURM_SQUEUE_PARSE_H_
#define EXPANSE_SLURM_SQUEUE_PARSE_H_

#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/job_info.h"

namespace expanse::slurm {

// Requested resources, first source that says:
//   nodes  node_count, else node= of tres_req_str
//   cpus   cpus, else cpu= of tres_req_str
//   GPUs   gres/gpu of tres_req_str (the controller's own total; present where GPUs are
//          accounted), else tres_per_job, else tres_per_node x nodes, else tres_per_task x
//          tasks, else the GPUs allocated per gres_detail
//   memory memory_per_node x nodes, else memory_per_cpu x cpus, else mem= of tres_req_str
// gpu_indices pairs gres_detail[i] with job_resources.allocated_nodes[i] (SLURM builds both in
// the allocation's node order); left empty when their lengths differ.
//
// Errors are kInvalidArgument, reason "slurm_output", naming the field by its full path:
//   squeue --json: jobs[2].job_id must be a number
// as are output that is not JSON and output nested deeper or larger than SLURM's can be
// (kSlurmJsonLimits in slurm_json.h).
// A non-empty top-level "errors" list is kUnavailable, reason "slurm_error", with its first
// message: squeue then failed to ask slurmctld.
Result<std::vector<JobInfo>> ParseSqueueJson(std::string_view text);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_SQUEUE_PARSE_H_
