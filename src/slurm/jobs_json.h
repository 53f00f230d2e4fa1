// Internal to the slurm module: what reading `squeue --json` and `sacct --json` share beyond the
// JSON reader itself: the document's "jobs" array, and which of a job's times are facts.
#ifndef EXPANSE_SLURM_JOBS_JSON_H_
#define EXPANSE_SLURM_JOBS_JSON_H_

#include <string_view>
#include <vector>

#include "core/result.h"
#include "slurm/job_info.h"
#include "slurm/slurm_json.h"
#include "wire/field_reader.h"

namespace expanse::slurm::json_internal {

// Reads one element of "jobs"; its errors name the field by path ("jobs[2].job_id"), and
// ReadJobsDocument puts the command before them.
using ReadJobFn = Result<JobInfo> (*)(const wire::FieldReader& job);

// Parses `text`, fails on the errors SLURM reports in it, and reads every element of its required
// "jobs" array with `read_job`, in order. Every error names `command` ("squeue --json") first.
Result<std::vector<JobInfo>> ReadJobsDocument(std::string_view text, std::string_view command,
                                              ReadJobFn read_job);

// A job's times as SLURM prints them (Unix seconds).
struct JobTimes {
  Number submit;
  Number start;
  Number end;
};

// Sets submit_ms, and start_ms and end_ms only where they are facts (job_fields::IsWaitingState,
// HasEnded): for a job that has not started or not ended SLURM prints an estimate, or 0.
void SetJobTimes(const JobTimes& times, JobInfo& info);

}  // namespace expanse::slurm::json_internal

#endif  // EXPANSE_SLURM_JOBS_JSON_H_
