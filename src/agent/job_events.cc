#include "agent/job_events.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/file_util.h"
#include "core/utf8.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"
#include "wire/records.h"

namespace expanse::agent {
namespace {

std::string Get(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

// SLURM's job, array task and het offset ids are 32-bit: decimal digits only (no sign or space)
// within uint32_t. A longer number is not slurmd's, and is refused rather than cut.
std::optional<uint32_t> SlurmNumber(const std::string& s) {
  if (s.empty() || s.size() > 10 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  uint64_t value = 0;
  std::from_chars(s.data(), s.data() + s.size(), value);
  if (value > std::numeric_limits<uint32_t>::max())
    return std::nullopt;
  return static_cast<uint32_t>(value);
}

bool IsSlurmNumber(const std::string& s) { return SlurmNumber(s).has_value(); }

}  // namespace

Result<JobEvent> JobEventFromEnvironment(const std::string& kind,
                                         const std::map<std::string, std::string>& env,
                                         const std::string& fallback_host, int64_t now_ms) {
  JobEvent e;
  e.kind = kind;
  const std::string job = Get(env, "SLURM_JOB_ID");
  const std::string array_job = Get(env, "SLURM_ARRAY_JOB_ID");
  const std::string array_task = Get(env, "SLURM_ARRAY_TASK_ID");
  const std::string het_job = Get(env, "SLURM_HET_JOB_ID");
  const std::string het_offset = Get(env, "SLURM_HET_JOB_OFFSET");
  if (IsSlurmNumber(array_job) && IsSlurmNumber(array_task)) {
    e.job_id = array_job + "_" + array_task;  // how squeue and sacct name an array task
  } else if (IsSlurmNumber(het_job) && IsSlurmNumber(het_offset)) {
    e.job_id = het_job + "+" + het_offset;
  } else if (IsSlurmNumber(job)) {
    e.job_id = job;
  } else if (job.empty()) {
    return InvalidArgumentError("no SLURM_JOB_ID in the hook's environment (was it run by slurmd?)")
        .WithReason("no_job");
  } else {
    return InvalidArgumentError("SLURM_JOB_ID \"" + CleanText(job, 32) +
                                "\" is not a SLURM job id (digits, at most 4294967295)")
        .WithReason("no_job");
  }
  if (const std::optional<uint32_t> id = SlurmNumber(job))
    e.slurm_job_id = *id;
  const std::string node = Get(env, "SLURMD_NODENAME");
  e.host = CleanText(node.empty() ? fallback_host : node, 253);
  e.at_ms = now_ms;
  e.user = CleanText(Get(env, "SLURM_JOB_USER"), 64);
  e.partition = CleanText(Get(env, "SLURM_JOB_PARTITION"), 64);
  e.gpus = CleanText(Get(env, "SLURM_JOB_GPUS"), 512);
  e.cuda_visible_devices = CleanText(Get(env, "CUDA_VISIBLE_DEVICES"), 2048);
  return e;
}

nlohmann::json ToJson(const JobEvent& e) {
  return {{"version", 1},
          {"kind", e.kind},
          {"job_id", e.job_id},
          {"host", e.host},
          {"at_ms", e.at_ms},
          {"user", e.user},
          {"partition", e.partition},
          {"gpus", e.gpus},
          {"cuda_visible_devices", e.cuda_visible_devices},
          {"slurm_job_id", e.slurm_job_id}};
}

Result<JobEvent> JobEventFromJson(const nlohmann::json& j) {
  // Read by the sampler from files the hooks wrote, and by the controller from what a worker
  // wrote: every member is checked, nothing throws.
  constexpr char kReason[] = "invalid_event";
  if (!j.is_object()) {
    return InvalidArgumentError("job event: not a version 1 object").WithReason(kReason);
  }
  EXPANSE_ASSIGN_OR_RETURN(wire::FieldReader r, wire::FieldReader::Object(j, "job_event", kReason));
  if (Result<int64_t> version = r.Int("version", 1, 1, wire::Need::kRequired); !version.ok()) {
    return InvalidArgumentError("job event: not a version 1 object (" + version.status().message() +
                                ")")
        .WithReason(kReason);
  }
  // The same rules as the ingest batch's job_events (wire/records.h) for what is uploaded.
  EXPANSE_ASSIGN_OR_RETURN(wire::JobEventRecord record,
                           wire::DecodeJobEvent(j, "job_event", kReason));
  JobEvent e;
  e.kind = std::move(record.kind);
  e.job_id = std::move(record.job_id);
  e.host = std::move(record.host);
  e.at_ms = record.at_ms;
  EXPANSE_ASSIGN_OR_RETURN(e.user, r.Text("user", 64, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(e.partition, r.Text("partition", 64, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(e.gpus, r.Text("gpus", 512, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(e.cuda_visible_devices,
                           r.Text("cuda_visible_devices", 2048, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(
      const int64_t slurm_job_id,
      r.Int("slurm_job_id", 0, std::numeric_limits<uint32_t>::max(), wire::Need::kOptional));
  e.slurm_job_id = static_cast<uint32_t>(slurm_job_id);
  return e;
}

Status WriteJobEvent(const std::string& dir, const JobEvent& event) {
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(dir, 0755));
  size_t pending = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      if (entry->d_name[0] != '.' && ++pending >= kMaxPendingEvents)
        break;
    }
    closedir(d);
  }
  if (pending >= kMaxPendingEvents) {
    return ResourceExhaustedError(dir + " holds " + std::to_string(pending) +
                                  " uncollected job events; is the Expanse sampler running?")
        .WithReason("events_full");
  }
  std::string job = event.job_id;
  std::replace(job.begin(), job.end(), '+', 'h');
  const std::string name = std::to_string(event.at_ms) + "-" + job + "-" + event.kind + ".json";
  return fs::WriteFileAtomically(dir, name, ToJson(event).dump() + "\n", 0644);
}

PendingEvents ReadJobEvents(const std::string& dir, size_t max_events) {
  PendingEvents out;
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name.empty() || name[0] == '.')
        continue;  // ., .., and temporary files
      if (name.size() > 5 && name.ends_with(".json"))
        names.push_back(name);
    }
    closedir(d);
  }
  // Names start with the event time, so this is time order (same width until 2286).
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (out.events.size() >= max_events)
      break;
    Result<std::optional<std::string>> text = fs::ReadSmallFile(dir + "/" + name, 16 * 1024);
    if (!text.ok() || !text->has_value()) {
      // Bad for good (deleted at the next Commit) only when the file itself is wrong: too
      // large, a FIFO or socket, or closed to us. Any other failure (EMFILE, EIO; also a
      // directory, which is not ours to delete) leaves it for the next collection: deleted, an
      // Epilog's event would leave its job open here.
      const StatusCode code = text.ok() ? StatusCode::kOk : text.status().code();
      if (code == StatusCode::kResourceExhausted || code == StatusCode::kInvalidArgument ||
          code == StatusCode::kPermissionDenied)
        out.bad.push_back(name);
      continue;
    }
    Result<nlohmann::json> json = wire::ParseJson(**text, wire::JsonLimits{.max_depth = 4});
    Result<JobEvent> event = json.ok() ? JobEventFromJson(*json) : json.status();
    if (!event.ok()) {
      out.bad.push_back(name);
      continue;
    }
    out.events.emplace_back(name, std::move(*event));
  }
  return out;
}

}  // namespace expanse::agent
