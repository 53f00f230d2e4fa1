#include "slurm/jobs_json.h"

#include <utility>

#include "slurm/job_fields.h"

namespace expanse::slurm::json_internal {

namespace {

Result<std::vector<JobInfo>> ReadJobs(const nlohmann::json& document, ReadJobFn read_job) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader top, ReadTopLevel(document));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<wire::FieldReader> jobs,
                           top.Objects("jobs", kMaxEntries, wire::Need::kRequired));
  std::vector<JobInfo> infos;
  infos.reserve(jobs.size());
  for (const wire::FieldReader& job : jobs) {
    EXPANSE_ASSIGN_OR_RETURN(JobInfo info, read_job(job));
    infos.push_back(std::move(info));
  }
  return infos;
}

}  // namespace

Result<std::vector<JobInfo>> ReadJobsDocument(std::string_view text, std::string_view command,
                                              ReadJobFn read_job) {
  EXPANSE_ASSIGN_OR_RETURN(const nlohmann::json document, ParseDocument(text, command));
  EXPANSE_RETURN_IF_ERROR(CheckReportedErrors(document, command));
  Result<std::vector<JobInfo>> jobs = ReadJobs(document, read_job);
  if (!jobs.ok())
    return NameCommand(jobs.status(), command);
  return jobs;
}

void SetJobTimes(const JobTimes& times, JobInfo& info) {
  info.submit_ms = SecondsToMillis(times.submit);
  if (!job_fields::IsWaitingState(info.state))
    info.start_ms = SecondsToMillis(times.start);
  if (job_fields::HasEnded(info.state))
    info.end_ms = SecondsToMillis(times.end);
}

}  // namespace expanse::slurm::json_internal
