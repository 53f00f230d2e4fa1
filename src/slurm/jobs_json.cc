#include "slurm/jobs_json.h"

#include <utility>

#include "slurm/job_fields.h"

namespace expanse::slurm::json_internal {

Result<std::vector<JobInfo>> ReadJobsDocument(std::string_view text, std::string_view command,
                                              ReadJobFn read_job) {
  EXPANSE_ASSIGN_OR_RETURN(const nlohmann::json document, ParseDocument(text, command));
  EXPANSE_RETURN_IF_ERROR(CheckReportedErrors(document, command));
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader top, ObjectReader::Make(document, command, ""));
  if (!top.Has("jobs"))
    return top.Error("jobs", "missing");
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<ObjectReader> jobs, top.GetObjects("jobs"));
  std::vector<JobInfo> infos;
  infos.reserve(jobs.size());
  for (const ObjectReader& job : jobs) {
    EXPANSE_ASSIGN_OR_RETURN(JobInfo info, read_job(job));
    infos.push_back(std::move(info));
  }
  return infos;
}

void SetJobTimes(const JobTimes& times, JobInfo& info) {
  info.submit_ms = SecondsToMillis(times.submit);
  if (!job_fields::IsWaitingState(info.state))
    info.start_ms = SecondsToMillis(times.start);
  if (job_fields::HasEnded(info.state))
    info.end_ms = SecondsToMillis(times.end);
}

}  // namespace expanse::slurm::json_internal
