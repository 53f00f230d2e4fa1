#include "slurm/scontrol_parse.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>

#include "slurm/gres.h"
#include "slurm/hostlist.h"
#include "slurm/job_fields.h"

namespace expanse::slurm {
namespace {

constexpr std::string_view kScontrolCommand = "scontrol show job";

Status LineError(size_t line_number, std::string_view what) {
  return InvalidArgumentError(std::string(kScontrolCommand) + ": line " +
                              std::to_string(line_number) + ": " + std::string(what))
      .WithReason("slurm_output");
}

std::optional<int64_t> ParseNumber(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || value < 0)
    return std::nullopt;
  return value;
}

// The value of the first space-separated "key=value" token with this key, if any.
std::optional<std::string_view> TokenValue(std::string_view line, std::string_view key) {
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t start = line.find_first_not_of(' ', pos);
    if (start == std::string_view::npos)
      break;
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos)
      end = line.size();
    const std::string_view token = line.substr(start, end - start);
    if (token.size() > key.size() && token.starts_with(key) && token[key.size()] == '=')
      return token.substr(key.size() + 1);
    pos = end;
  }
  return std::nullopt;
}

// "JobId=9 ArrayJobId=4 ArrayTaskId=0 JobName=arr". JobName comes last and may hold spaces, so
// only the text before it is read.
Result<JobGres> ParseHeader(std::string_view line, size_t line_number) {
  const size_t name = line.find(" JobName=");
  const std::string_view ids = line.substr(0, name);
  job_fields::JobIdParts parts;
  const auto number = [&](std::string_view key, bool required) -> Result<std::optional<int64_t>> {
    const std::optional<std::string_view> value = TokenValue(ids, key);
    if (!value.has_value()) {
      if (required)
        return LineError(line_number, std::string(key) + ": missing");
      return std::optional<int64_t>();
    }
    const std::optional<int64_t> parsed = ParseNumber(*value);
    if (!parsed.has_value())
      return LineError(line_number, std::string(key) + ": expected a number");
    return parsed;
  };
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<int64_t> job_id, number("JobId", true));
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<int64_t> array_job_id, number("ArrayJobId", false));
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<int64_t> het_job_id, number("HetJobId", false));
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<int64_t> het_offset, number("HetJobOffset", false));
  parts.job_id = *job_id;
  parts.array_job_id = array_job_id.value_or(0);
  parts.het_job_id = het_job_id.value_or(0);
  parts.het_job_offset = het_offset.value_or(0);
  // A single task ("0"), or the tasks still pending in the array's own record ("1-3").
  if (const std::optional<std::string_view> task = TokenValue(ids, "ArrayTaskId")) {
    if (const std::optional<int64_t> task_id = ParseNumber(*task))
      parts.array_task_id = *task_id;
    else
      parts.array_task_string = std::string(*task);
  }
  JobGres record;
  record.job_id = job_fields::FormatJobId(parts);
  record.slurm_job_id = parts.job_id;
  return record;
}

// "Nodes=worker[1-2] CPU_IDs=1 Mem=0 GRES=gpu:2(IDX:0-1)". Before 20.02 the field was GRES_IDX.
Status ParseNodesLine(std::string_view line, size_t line_number, JobGres& record) {
  const std::optional<std::string_view> nodes = TokenValue(line, "Nodes");
  std::optional<std::string_view> gres = TokenValue(line, "GRES");
  if (!gres.has_value())
    gres = TokenValue(line, "GRES_IDX");
  if (!nodes.has_value() || !gres.has_value())
    return OkStatus();
  Result<std::vector<int>> indices = GpuIndicesFromGres(*gres);
  if (!indices.ok())
    return LineError(line_number, indices.status().message());
  // An empty Nodes= names no host; ExpandHostList would reject it as an empty expression.
  if (indices->empty() || nodes->empty())
    return OkStatus();
  Result<std::vector<std::string>> hosts = ExpandHostList(*nodes);
  if (!hosts.ok())
    return LineError(line_number, hosts.status().message());
  for (const std::string& host : *hosts) {
    std::vector<int>& merged = record.gpu_indices[host];
    merged.insert(merged.end(), indices->begin(), indices->end());
    std::sort(merged.begin(), merged.end());
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<JobGres>> ParseScontrolShowJob(std::string_view text) {
  std::vector<JobGres> records;
  bool in_record = false;
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (line.ends_with('\r'))
      line.remove_suffix(1);
    if (line.starts_with("JobId=")) {
      EXPANSE_ASSIGN_OR_RETURN(JobGres record, ParseHeader(line, line_number));
      records.push_back(std::move(record));
      in_record = true;
      continue;
    }
    // Text outside a record ("No jobs in the system") carries nothing to read.
    if (!in_record)
      continue;
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string_view::npos)
      continue;
    line.remove_prefix(indent);
    if (line.starts_with("Nodes=")) {
      EXPANSE_RETURN_IF_ERROR(ParseNodesLine(line, line_number, records.back()));
    } else if (line.starts_with("JobState=")) {
      records.back().state = std::string(*TokenValue(line, "JobState"));
    }
  }
  return records;
}

bool SaysInvalidJobId(std::string_view output) {
  return output.find("Invalid job id specified") != std::string_view::npos;
}

}  // namespace expanse::slurm
