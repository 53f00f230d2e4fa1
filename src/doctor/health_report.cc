#include "doctor/health_report.h"

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "spool/spool_file.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::doctor {
namespace {

// Bounds on what one report may make the doctor hold; a sampler writes far less (64 KiB).
constexpr size_t kMaxGpus = 256;
constexpr size_t kMaxProcessesPerGpu = 64;
constexpr size_t kMaxJobsPerGpu = 16;
constexpr size_t kMaxCapabilities = 32;
constexpr size_t kMaxJobDevices = 64;
constexpr size_t kMaxText = 512;

std::string Text(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_string())
    return "";
  std::string value = it->get<std::string>();
  if (value.size() > kMaxText)
    value.resize(kMaxText);
  // Clean of C0 and C1 controls alike: findings are printed to a terminal.
  return wire::IsTerminalText(value) ? value : QuoteForMessage(value, kMaxText);
}

int64_t Int(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_integer())
    return 0;
  return it->get<int64_t>();
}

// A time in Unix ms, 0 when absent or outside what the wire allows (year 0 to 9999): the
// checks subtract times, which a hostile INT64_MIN would overflow.
int64_t TimeMs(int64_t value) { return value >= 0 && value <= wire::kMaxTimeMs ? value : 0; }

uint64_t Count(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_unsigned())
    return 0;
  return it->get<uint64_t>();
}

bool Bool(const nlohmann::json& doc, const char* key, bool fallback) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// "inventory": {"gpus": [{"uuid", "minor", ...}]} (agent/gpu_json.cc).
void ReadInventory(const nlohmann::json& report, NodeFacts& node) {
  const auto inventory = report.find("inventory");
  if (inventory == report.end() || !inventory->is_object())
    return;
  const auto gpus = inventory->find("gpus");
  if (gpus == inventory->end() || !gpus->is_array())
    return;
  for (const nlohmann::json& gpu : *gpus) {
    if (node.gpus.size() >= kMaxGpus || !gpu.is_object())
      break;
    GpuFacts facts;
    facts.uuid = Text(gpu, "uuid");
    if (const auto minor = gpu.find("minor");
        minor != gpu.end() && minor->is_number_unsigned() && minor->get<uint64_t>() < (1u << 20))
      facts.minor = static_cast<uint32_t>(minor->get<uint64_t>());
    node.gpus.push_back(std::move(facts));
  }
}

// "gpu_use": [{"uuid", "jobs": [...], "processes": [{"pid", "job_id", "of_allocated_job",
// "outside_cgroup"}]}] (agent/gpu_use.h).
void ReadGpuUse(const nlohmann::json& report, NodeFacts& node) {
  const auto use = report.find("gpu_use");
  if (use == report.end() || !use->is_array())
    return;
  for (const nlohmann::json& gpu : *use) {
    if (node.gpu_use.size() >= kMaxGpus || !gpu.is_object())
      break;
    GpuUseFacts facts;
    facts.uuid = Text(gpu, "uuid");
    if (const auto jobs = gpu.find("jobs"); jobs != gpu.end() && jobs->is_array()) {
      for (const nlohmann::json& job : *jobs) {
        if (facts.jobs.size() >= kMaxJobsPerGpu)
          break;
        if (job.is_string())
          facts.jobs.push_back(Text(nlohmann::json{{"j", job}}, "j"));
        else if (job.is_number_unsigned())
          facts.jobs.push_back(std::to_string(job.get<uint64_t>()));
      }
    }
    if (const auto procs = gpu.find("processes"); procs != gpu.end() && procs->is_array()) {
      for (const nlohmann::json& p : *procs) {
        if (facts.processes.size() >= kMaxProcessesPerGpu || !p.is_object())
          break;
        GpuProcessFacts process;
        process.pid = Int(p, "pid");
        if (const auto job = p.find("job_id"); job != p.end()) {
          if (job->is_string())
            process.job_id = Text(p, "job_id");
          else if (job->is_number_unsigned())
            process.job_id = std::to_string(job->get<uint64_t>());
        }
        process.of_allocated_job = Bool(p, "of_allocated_job", true);
        process.outside_cgroup = Bool(p, "outside_cgroup", false);
        facts.processes.push_back(std::move(process));
      }
    }
    node.gpu_use.push_back(std::move(facts));
  }
}

// Text members of an array, at most `max`; anything else is skipped.
std::vector<std::string> Texts(const nlohmann::json& doc, const char* key, size_t max) {
  std::vector<std::string> out;
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_array())
    return out;
  for (const nlohmann::json& item : *it) {
    if (out.size() >= max)
      break;
    if (item.is_string())
      out.push_back(Text(nlohmann::json{{"t", item}}, "t"));
  }
  return out;
}

// "job_devices": [{"job_id", "state", "allocated_gpus", "cgroup_gpus", "detail"}]
// (agent/job_devices_check.h). An entry without a job or with an unknown state is skipped.
void ReadJobDevices(const nlohmann::json& report, NodeFacts& node) {
  const auto checks = report.find("job_devices");
  if (checks == report.end() || !checks->is_array())
    return;
  for (const nlohmann::json& c : *checks) {
    if (node.job_devices.size() >= kMaxJobDevices)
      break;
    if (!c.is_object())
      continue;
    JobDevicesFacts facts;
    facts.job_id = Text(c, "job_id");
    facts.state = Text(c, "state");
    if (facts.job_id.empty() ||
        (facts.state != "agrees" && facts.state != "disagrees" && facts.state != "unconstrained" &&
         facts.state != "not_checked" && facts.state != "unreadable"))
      continue;
    facts.allocated_gpus = Texts(c, "allocated_gpus", kMaxGpus);
    facts.cgroup_gpus = Texts(c, "cgroup_gpus", kMaxGpus);
    facts.detail = Text(c, "detail");
    node.job_devices.push_back(std::move(facts));
  }
}

void ReadCapabilities(const nlohmann::json& report, NodeFacts& node) {
  const auto caps = report.find("capabilities");
  if (caps == report.end() || !caps->is_object())
    return;
  for (const auto& [key, value] : caps->items()) {
    if (node.capabilities.size() >= kMaxCapabilities)
      break;
    if (!value.is_object() || !wire::IsName(key, 64, "_", false))
      continue;
    node.capabilities[key] = {Text(value, "state"), Text(value, "reason")};
  }
}

}  // namespace

Result<NodeFacts> ParseHealthPayload(std::string_view payload, const std::string& host,
                                     int64_t written_ms) {
  wire::JsonLimits limits;
  limits.max_depth = 8;
  limits.max_values = 100'000;
  limits.max_string_bytes = 64 << 10;
  Result<nlohmann::json> doc = wire::ParseJson(payload, limits);
  if (!doc.ok())
    return InvalidArgumentError("the report is not JSON: " + doc.status().message());
  if (!doc->is_object())
    return InvalidArgumentError("the report is not a JSON object");
  const std::string reported_host = Text(*doc, "host");
  if (!reported_host.empty() && reported_host != host) {
    return InvalidArgumentError("the report in " + host + "'s directory names host " +
                                QuoteForMessage(reported_host));
  }
  NodeFacts node;
  node.host = host;
  node.written_ms = TimeMs(written_ms);
  node.last_sample_ms = TimeMs(Int(*doc, "last_sample_ms"));
  node.problem = Text(*doc, "problem");
  if (const auto spool = doc->find("spool"); spool != doc->end() && spool->is_object()) {
    node.spool_write_errors = Count(*spool, "write_errors");
    node.spool_records_dropped = Count(*spool, "records_dropped");
  }
  ReadInventory(*doc, node);
  ReadCapabilities(*doc, node);
  ReadGpuUse(*doc, node);
  ReadJobDevices(*doc, node);
  return node;
}

Result<NodeFacts> ReadHealthFile(std::string_view bytes, const std::string& host) {
  Result<spool::SpoolFile> file = spool::DecodeSpoolFile(bytes);
  if (!file.ok())
    return DataLossError("health.rec is damaged (" + file.status().reason() + ")");
  if (file->host != host) {
    return DataLossError("health.rec in " + host + "'s directory was written by " +
                         QuoteForMessage(file->host));
  }
  for (const spool::SpoolRecord& record : file->records) {
    if (record.kind == "worker_health")
      return ParseHealthPayload(record.payload, host, file->created_ms);
  }
  return DataLossError("health.rec holds no worker_health record");
}

}  // namespace expanse::doctor
