#include "slurm/sacct_parse.h"

#include <map>
#include <optional>
#include <string>

#include "slurm/job_fields.h"
#include "slurm/jobs_json.h"
#include "slurm/slurm_json.h"
#include "slurm/tres.h"

namespace expanse::slurm {
namespace {

using json_internal::Number;
using json_internal::ObjectReader;

constexpr std::string_view kCommand = "sacct --json";

Result<job_fields::JobIdParts> ReadIdParts(const ObjectReader& job) {
  job_fields::JobIdParts parts;
  EXPANSE_ASSIGN_OR_RETURN(parts.job_id, job.GetRequiredNumber("job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader array, job.GetObject("array"));
  EXPANSE_ASSIGN_OR_RETURN(const Number array_job_id, array.GetNumber("job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number task_id, array.GetNumber("task_id"));
  EXPANSE_ASSIGN_OR_RETURN(parts.array_task_string, array.GetString("task"));
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader het, job.GetObject("het"));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_id, het.GetNumber("job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_offset, het.GetNumber("job_offset"));
  parts.array_job_id = array_job_id.value_or(0);
  if (task_id.has_value())
    parts.array_task_id = task_id.value;
  parts.het_job_id = het_job_id.value_or(0);
  parts.het_job_offset = het_job_offset.value_or(0);
  return parts;
}

// tres.requested as "type" or "type/name" -> count: "cpu", "mem", "node", "gres/gpu".
Result<std::map<std::string, int64_t>> ReadRequestedTres(const ObjectReader& job) {
  std::map<std::string, int64_t> counts;
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader tres, job.GetObject("tres"));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<ObjectReader> requested, tres.GetObjects("requested"));
  for (const ObjectReader& item : requested) {
    EXPANSE_ASSIGN_OR_RETURN(const std::string type, item.GetString("type"));
    EXPANSE_ASSIGN_OR_RETURN(const std::string name, item.GetString("name"));
    EXPANSE_ASSIGN_OR_RETURN(const Number count, item.GetNumber("count"));
    if (type.empty() || !count.has_value())
      continue;
    std::string key = type;
    if (!name.empty())
      key.append("/").append(name);
    counts[key] = count.value;
  }
  return counts;
}

Result<JobInfo> ReadJob(const ObjectReader& job) {
  JobInfo info;
  EXPANSE_ASSIGN_OR_RETURN(const job_fields::JobIdParts parts, ReadIdParts(job));
  info.job_id = job_fields::FormatJobId(parts);
  info.slurm_job_id = parts.job_id;
  EXPANSE_ASSIGN_OR_RETURN(info.name, job.GetString("name"));
  EXPANSE_ASSIGN_OR_RETURN(info.user, job.GetString("user"));
  EXPANSE_ASSIGN_OR_RETURN(info.account, job.GetString("account"));
  EXPANSE_ASSIGN_OR_RETURN(info.partition, job.GetString("partition"));
  EXPANSE_ASSIGN_OR_RETURN(info.nodes, job.GetString("nodes"));
  if (info.nodes == "None assigned")
    info.nodes.clear();
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader state, job.GetObject("state"));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> states, state.GetStrings("current"));
  info.state = job_fields::ReportedState(states);

  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader time, job.GetObject("time"));
  EXPANSE_ASSIGN_OR_RETURN(const Number submission, time.GetNumber("submission"));
  EXPANSE_ASSIGN_OR_RETURN(const Number start, time.GetNumber("start"));
  EXPANSE_ASSIGN_OR_RETURN(const Number end, time.GetNumber("end"));
  EXPANSE_ASSIGN_OR_RETURN(const Number limit, time.GetNumber("limit"));
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
  EXPANSE_ASSIGN_OR_RETURN(const Number allocation_nodes, job.GetNumber("allocation_nodes"));
  EXPANSE_ASSIGN_OR_RETURN(const ObjectReader required, job.GetObject("required"));
  EXPANSE_ASSIGN_OR_RETURN(const Number required_cpus, required.GetNumber("CPUs"));
  info.req_nodes = requested_count("node").value_or(allocation_nodes.value_or(0));
  info.req_cpus = requested_count("cpu").value_or(required_cpus.value_or(0));
  info.req_gpus = tres::GpusInTresCounts(requested).value_or(0);

  std::optional<int64_t> memory = requested_count("mem");
  if (!memory.has_value()) {
    EXPANSE_ASSIGN_OR_RETURN(const Number per_node, required.GetNumber("memory_per_node"));
    EXPANSE_ASSIGN_OR_RETURN(const Number per_cpu, required.GetNumber("memory_per_cpu"));
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
  return json_internal::ReadJobsDocument(text, kCommand, &ReadJob);
}

bool SaysAccountingDisabled(std::string_view output) {
  return output.find("accounting storage is disabled") != std::string_view::npos;
}

}  // namespace expanse::slurm
