#include "slurm/squeue_parse.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "slurm/gres.h"
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

constexpr std::string_view kSqueueCommand = "squeue --json";

// count x per-unit, when both are known and the product fits; nullopt otherwise.
std::optional<int64_t> Times(const Number& per_unit, int64_t units) {
  if (!per_unit.has_value() || per_unit.value == 0 || units == 0)
    return std::nullopt;
  return json_internal::CheckedMultiply(per_unit.value, units);
}

Result<job_fields::JobIdParts> ReadSqueueIdParts(const FieldReader& job) {
  job_fields::JobIdParts parts;
  EXPANSE_ASSIGN_OR_RETURN(parts.job_id, ReadRequiredNumber(job, "job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number array_job_id, ReadNumber(job, "array_job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number array_task_id, ReadNumber(job, "array_task_id"));
  EXPANSE_ASSIGN_OR_RETURN(parts.array_task_string, ReadString(job, "array_task_string"));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_id, ReadNumber(job, "het_job_id"));
  EXPANSE_ASSIGN_OR_RETURN(const Number het_job_offset, ReadNumber(job, "het_job_offset"));
  parts.array_job_id = array_job_id.value_or(0);
  if (array_task_id.has_value())
    parts.array_task_id = array_task_id.value;
  parts.het_job_id = het_job_id.value_or(0);
  parts.het_job_offset = het_job_offset.value_or(0);
  return parts;
}

// gres_detail[i] belongs to job_resources.allocated_nodes[i]. A string that does not parse
// leaves that host out: the indices are a bonus, scontrol can still be asked.
Result<GpuIndicesByHost> ReadGpuIndices(const FieldReader& job) {
  GpuIndicesByHost by_host;
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> details, ReadStrings(job, "gres_detail"));
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader resources,
                           job.Member("job_resources", Need::kOptional));
  if (details.empty())
    return by_host;
  EXPANSE_ASSIGN_OR_RETURN(
      const std::vector<FieldReader> nodes,
      resources.Objects("allocated_nodes", json_internal::kMaxEntries, Need::kOptional));
  if (nodes.size() != details.size())
    return by_host;
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(const std::string host, ReadString(nodes[i], "nodename"));
    Result<std::vector<int>> indices = GpuIndicesFromGres(details[i]);
    if (host.empty() || !indices.ok() || indices->empty())
      continue;
    std::vector<int>& merged = by_host[host];
    merged.insert(merged.end(), indices->begin(), indices->end());
    std::sort(merged.begin(), merged.end());
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
  }
  return by_host;
}

int64_t SumGpus(const GpuIndicesByHost& by_host) {
  int64_t total = 0;
  for (const auto& [host, indices] : by_host)
    total += static_cast<int64_t>(indices.size());
  return total;
}

Result<JobInfo> ReadSqueueJob(const FieldReader& job) {
  JobInfo info;
  EXPANSE_ASSIGN_OR_RETURN(const job_fields::JobIdParts parts, ReadSqueueIdParts(job));
  info.job_id = job_fields::FormatJobId(parts);
  info.slurm_job_id = parts.job_id;
  EXPANSE_ASSIGN_OR_RETURN(info.name, ReadString(job, "name"));
  EXPANSE_ASSIGN_OR_RETURN(info.user, ReadString(job, "user_name"));
  EXPANSE_ASSIGN_OR_RETURN(info.account, ReadString(job, "account"));
  EXPANSE_ASSIGN_OR_RETURN(info.partition, ReadString(job, "partition"));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> states, ReadStrings(job, "job_state"));
  info.state = job_fields::ReportedState(states);
  EXPANSE_ASSIGN_OR_RETURN(info.nodes, ReadString(job, "nodes"));

  EXPANSE_ASSIGN_OR_RETURN(const Number submit, ReadNumber(job, "submit_time"));
  EXPANSE_ASSIGN_OR_RETURN(const Number start, ReadNumber(job, "start_time"));
  EXPANSE_ASSIGN_OR_RETURN(const Number end, ReadNumber(job, "end_time"));
  json_internal::SetJobTimes({.submit = submit, .start = start, .end = end}, info);

  EXPANSE_ASSIGN_OR_RETURN(const std::string tres_req, ReadString(job, "tres_req_str"));
  const std::map<std::string, int64_t> requested = tres::ParseTresCounts(tres_req);
  const auto requested_count = [&](const char* name) {
    const auto it = requested.find(name);
    return it == requested.end() ? 0 : it->second;
  };
  EXPANSE_ASSIGN_OR_RETURN(const Number node_count, ReadNumber(job, "node_count"));
  EXPANSE_ASSIGN_OR_RETURN(const Number cpus, ReadNumber(job, "cpus"));
  EXPANSE_ASSIGN_OR_RETURN(const Number tasks, ReadNumber(job, "tasks"));
  info.req_nodes = node_count.has_value() ? node_count.value : requested_count("node");
  info.req_cpus = cpus.has_value() ? cpus.value : requested_count("cpu");

  EXPANSE_ASSIGN_OR_RETURN(info.gpu_indices, ReadGpuIndices(job));
  EXPANSE_ASSIGN_OR_RETURN(const std::string per_job, ReadString(job, "tres_per_job"));
  EXPANSE_ASSIGN_OR_RETURN(const std::string per_node, ReadString(job, "tres_per_node"));
  EXPANSE_ASSIGN_OR_RETURN(const std::string per_task, ReadString(job, "tres_per_task"));
  std::optional<int64_t> gpus = tres::GpusInTresCounts(requested);
  if (!gpus.has_value())
    gpus = tres::GpusInTresPer(per_job);
  if (!gpus.has_value()) {
    if (const std::optional<int64_t> each = tres::GpusInTresPer(per_node))
      gpus = json_internal::CheckedMultiply(*each, std::max<int64_t>(info.req_nodes, 1));
  }
  if (!gpus.has_value() && tasks.has_value()) {
    if (const std::optional<int64_t> each = tres::GpusInTresPer(per_task))
      gpus = json_internal::CheckedMultiply(*each, tasks.value);
  }
  info.req_gpus = gpus.has_value() ? *gpus : SumGpus(info.gpu_indices);

  EXPANSE_ASSIGN_OR_RETURN(const Number memory_per_node, ReadNumber(job, "memory_per_node"));
  EXPANSE_ASSIGN_OR_RETURN(const Number memory_per_cpu, ReadNumber(job, "memory_per_cpu"));
  std::optional<int64_t> memory = Times(memory_per_node, info.req_nodes);
  if (!memory.has_value())
    memory = Times(memory_per_cpu, info.req_cpus);
  info.req_mem_mib = memory.has_value() ? *memory : requested_count("mem");

  EXPANSE_ASSIGN_OR_RETURN(const Number time_limit, ReadNumber(job, "time_limit"));
  info.time_limit_s =
      time_limit.has_value() ? json_internal::CheckedMultiply(time_limit.value, 60).value_or(0) : 0;
  return info;
}

}  // namespace

Result<std::vector<JobInfo>> ParseSqueueJson(std::string_view text) {
  return json_internal::ReadJobsDocument(text, kSqueueCommand, &ReadSqueueJob);
}

}  // namespace expanse::slurm
