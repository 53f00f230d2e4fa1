#include "slurm/sacct_parse.h"

#include <map>
#include <optional>
#include <string>

#include "slurm/job_fields.h"
#include "slurm/jobs_json.h"
#include "slurm/slurm_json.h"
#include "slurm/tres.h"
#include "wire/field_reader.h"

namespace expanse::slurm {
namespace {

using json_internal::Number;
using json_internal::ReadNumber;
using json_internal::ReadRequiredNumber;
using json_internal::ReadString;
using json_internal::ReadStrings;
using wire::FieldReader;
using wire::Need;

constexpr std::string_view kSacctCommand = "sacct --json";

Result<job_fields::JobIdParts> ReadSacctIdParts(const FieldReader& job) {
  job_fields::JobIdParts parts;
  EXPANSE_ASSIGN_OR_RETURN(parts.job_id, ReadRequiredNumber(job, "job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader array, job.Member("array", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const Number array_job_id, ReadNumber(array, "job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number task_id, ReadNumber(array, "task_id"));
  EXPANSE_ASSIGN_OR_RETURN(parts.array_task_string, ReadString(array, "task"));
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader het, job.Member("het", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_id, ReadNumber(het, "job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_offset, ReadNumber(het, "job_offset"));
  parts.array_job_id = array_job_id.value_or(0);
  if (task_id.has_value())
    parts.array_task_id = task_id.value;
  parts.het_job_id = het_job_id.value_or(0);
  parts.het_job_offset = het_job_offset.value_or(0);
  return parts;
}

// tres.requested as "type" or "type/name" -> count: "cpu", "mem", "node", "gres/gpu".
Result<std::map<std::string, int64_t>> ReadRequestedTres(const FieldReader& job) {
  std::map<std::string, int64_t> counts;
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader tres, job.Member("tres", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> requested,
                           tres.Objects("requested", json_internal::kMaxEntries, Need::kOptional));
  for (const FieldReader& item : requested) {
    EXPANSE_ASSIGN_OR_RETURN(const std::string type, ReadString(item, "type"));
    EXPANSE_ASSIGN_OR_RETURN(const std::string name, ReadString(item, "name"));
    EXPANSE_ASSIGN_OR_RETURN(const Number count, ReadNumber(item, "count"));
    if (type.empty() || !count.has_value())
      continue;
    std::string key = type;
    if (!name.empty())
      key.append("/").append(name);
    counts[key] = count.value;
  }
  return counts;
}

Result<JobInfo> ReadSacctJob(const FieldReader& job) {
  JobInfo info;
  EXPANSE_ASSIGN_OR_RETURN(const job_fields::JobIdParts parts, ReadSacctIdParts(job));
  info.job_id = job_fields::FormatJobId(parts);
  info.slurm_job_id = parts.job_id;
  EXPANSE_ASSIGN_OR_RETURN(info.name, ReadString(job, "name"));
  EXPANSE_ASSIGN_OR_RETURN(info.user, ReadString(job, "user"));
  EXPANSE_ASSIGN_OR_RETURN(info.account, ReadString(job, "account"));
  EXPANSE_ASSIGN_OR_RETURN(info.partition, ReadString(job, "partition"));
  EXPANSE_ASSIGN_OR_RETURN(info.nodes, ReadString(job, "nodes"));
  if (info.nodes == "None assigned")
    info.nodes.clear();
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader state, job.Member("state", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> states, ReadStrings(state, "current"));
  info.state = job_fields::ReportedState(states);

  EXPANSE_ASSIGN_OR_RETURN(const FieldReader time, job.Member("time", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const Number submission, ReadNumber(time, "submission"));
  EXPANSE_ASSIGN_OR_RETURN(const Number start, ReadNumber(time, "start"));
  EXPANSE_ASSIGN_OR_RETURN(const Number end, ReadNumber(time, "end"));
  EXPANSE_ASSIGN_OR_RETURN(const Number limit, ReadNumber(time, "limit"));
  json_internal::SetJobTimes({.submit = submission, .start = start, .end = end}, info);
  info.time_limit_s =
      limit.has_value() ? json_internal::CheckedMultiply(limit.value, 60).value_or(0) : 0;

  EXPANSE_ASSIGN_OR_RETURN(const auto requested, ReadRequestedTres(job));
  const auto requested_count = [&](const char* name) -> std::optional<int64_t> {
    const auto it = requested.find(name);
    if (it == requested.end())
      return std::nullopt;
    return it->second;
  };
  EXPANSE_ASSIGN_OR_RETURN(const Number allocation_nodes, ReadNumber(job, "allocation_nodes"));
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader required, job.Member("required", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const Number required_cpus, ReadNumber(required, "CPUs"));
  info.req_nodes = requested_count("node").value_or(allocation_nodes.value_or(0));
  info.req_cpus = requested_count("cpu").value_or(required_cpus.value_or(0));
  info.req_gpus = tres::GpusInTresCounts(requested).value_or(0);

  std::optional<int64_t> memory = requested_count("mem");
  if (!memory.has_value()) {
    EXPANSE_ASSIGN_OR_RETURN(const Number per_node, ReadNumber(required, "memory_per_node"));
    EXPANSE_ASSIGN_OR_RETURN(const Number per_cpu, ReadNumber(required, "memory_per_cpu"));
    if (per_node.has_value() && per_node.value > 0)
      memory = json_internal::CheckedMultiply(per_node.value, info.req_nodes);
    else if (per_cpu.has_value() && per_cpu.value > 0)
      memory = json_internal::CheckedMultiply(per_cpu.value, info.req_cpus);
  }
  info.req_mem_mib = memory.value_or(0);
  return info;
}

}  // namespace

Result<std::vector<JobInfo>> ParseSacctJson(std::string_view text) {
  return json_internal::ReadJobsDocument(text, kSacctCommand, &ReadSacctJob);
}

bool SaysAccountingDisabled(std::string_view output) {
  return output.find("accounting storage is disabled") != std::string_view::npos;
}

}  // namespace expanse::slurm
