#include "agent/heartbeat_builder.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "agent/gpu_json.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

// A worker's report is at most 64 KiB; what is relayed of it must stay within what the
// server reads of a heartbeat (shallow objects: capabilities are {name: {state, detail}}).
wire::JsonLimits WorkerHealthLimits() {
  wire::JsonLimits limits;
  limits.max_depth = 8;
  limits.max_string_bytes = 16u << 10;
  return limits;
}

// A worker's report is outside input, and the server refuses a whole heartbeat for one bad
// member (docs/formats/heartbeat.md): what is relayed of a report is rebuilt from the members
// that meet the heartbeat's rules; the rest is left out and lists are cut to its limits.
constexpr size_t kMaxUseJobs = 16;
constexpr size_t kMaxUseProcesses = 64;
constexpr size_t kMaxGpusPerNode = 64;
constexpr size_t kMaxReasonBytes = 1024;

bool CleanString(const nlohmann::json& value, size_t max) {
  return value.is_string() && value.get_ref<const std::string&>().size() <= max &&
         wire::IsCleanText(value.get_ref<const std::string&>());
}

bool NonNegative(const nlohmann::json& value) {
  int64_t ignored = 0;
  return wire::IntegerIn(value, 0, std::numeric_limits<int64_t>::max(), &ignored);
}

// The use view {"state", "jobs", "processes"} of one GPU; null when its state is unusable.
nlohmann::json CleanGpuUse(const nlohmann::json& use) {
  if (!use.is_object())
    return nullptr;
  auto state = use.find("state");
  static const std::set<std::string> kStates = {"free", "busy", "allocated_idle",
                                                "unallocated_in_use"};
  if (state == use.end() || !state->is_string() ||
      !kStates.contains(state->get_ref<const std::string&>())) {
    return nullptr;
  }
  nlohmann::json out = {{"state", *state}};
  nlohmann::json jobs = nlohmann::json::array();
  if (auto it = use.find("jobs"); it != use.end() && it->is_array()) {
    for (const auto& job : *it) {
      if (jobs.size() < kMaxUseJobs && CleanString(job, 64) &&
          !job.get_ref<const std::string&>().empty())
        jobs.push_back(job);
    }
  }
  out["jobs"] = std::move(jobs);
  nlohmann::json processes = nlohmann::json::array();
  if (auto it = use.find("processes"); it != use.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (processes.size() >= kMaxUseProcesses)
        break;
      if (!p.is_object() || !p.contains("pid") || !NonNegative(p["pid"]))
        continue;
      nlohmann::json process = {{"pid", p["pid"]}};
      if (p.contains("used_memory_mib") && NonNegative(p["used_memory_mib"]))
        process["used_memory_mib"] = p["used_memory_mib"];
      if (p.contains("job_id") && CleanString(p["job_id"], 64))
        process["job_id"] = p["job_id"];
      for (const char* flag : {"of_allocated_job", "outside_cgroup"}) {
        if (p.contains(flag) && p[flag].is_boolean())
          process[flag] = p[flag];
      }
      processes.push_back(std::move(process));
    }
  }
  out["processes"] = std::move(processes);
  return out;
}

// Capabilities the heartbeat knows, each {"state", "reason"?}; other entries are left out.
nlohmann::json CleanCapabilities(const nlohmann::json& caps) {
  static const std::set<std::string> kNames = {"nvml", "nvidia_smi", "cupti",
                                               "dcgm", "py_stacks",  "profiling_permissions"};
  static const std::set<std::string> kStates = {"ok", "degraded", "absent", "disabled"};
  nlohmann::json out = nlohmann::json::object();
  if (!caps.is_object())
    return out;
  for (const auto& [name, cap] : caps.items()) {
    if (!kNames.contains(name) || !cap.is_object())
      continue;
    auto state = cap.find("state");
    if (state == cap.end() || !state->is_string() ||
        !kStates.contains(state->get_ref<const std::string&>())) {
      continue;
    }
    nlohmann::json entry = {{"state", *state}};
    if (auto reason = cap.find("reason");
        reason != cap.end() && CleanString(*reason, kMaxReasonBytes))
      entry["reason"] = *reason;
    out[name] = std::move(entry);
  }
  return out;
}

// The use view entry of `uuid`, cleaned; null if none.
nlohmann::json UseOf(const nlohmann::json& gpu_use, const std::string& uuid) {
  if (!gpu_use.is_array())
    return nullptr;
  for (const auto& u : gpu_use) {
    if (u.is_object() && u.contains("uuid") && u["uuid"] == uuid)
      return CleanGpuUse(u);
  }
  return nullptr;
}

// A string member no longer than `max`, or "" (a worker's report is outside input: members of
// the wrong type are left out, never thrown on).
std::string StringMember(const nlohmann::json& object, const char* key, size_t max) {
  if (!object.is_object())
    return "";
  auto it = object.find(key);
  if (it == object.end() || !CleanString(*it, max))
    return "";
  return it->get<std::string>();
}

nlohmann::json NodeEntry(const std::string& host, const nlohmann::json& inventory,
                         const nlohmann::json& gpu_use) {
  nlohmann::json gpus = nlohmann::json::array();
  const std::string driver = StringMember(inventory, "driver_version", 64);
  const nlohmann::json* listed = nullptr;
  if (inventory.is_object()) {
    if (auto it = inventory.find("gpus"); it != inventory.end() && it->is_array())
      listed = &*it;
  }
  for (const auto& g : listed ? *listed : nlohmann::json::array()) {
    if (gpus.size() >= kMaxGpusPerNode)
      break;
    const std::string uuid = StringMember(g, "uuid", 96);
    if (uuid.empty())
      continue;
    nlohmann::json gpu = {{"uuid", uuid}};
    for (const char* key : {"index", "minor", "memory_total_mib"}) {
      if (g.contains(key) && g[key].is_number_unsigned())
        gpu[key] = g[key];
    }
    if (const std::string model = StringMember(g, "name", 128); !model.empty())
      gpu["model"] = model;
    if (!driver.empty())
      gpu["driver"] = driver;
    if (nlohmann::json use = UseOf(gpu_use, uuid); !use.is_null())
      gpu["use"] = std::move(use);
    gpus.push_back(std::move(gpu));
  }
  return {{"name", host}, {"gpus", std::move(gpus)}};
}

}  // namespace

nlohmann::json BuildHeartbeat(const HeartbeatInputs& in) {
  nlohmann::json nodes = nlohmann::json::array();
  nodes.push_back(
      NodeEntry(in.controller_host, ToJson(in.controller_inventory), in.controller_gpu_use));
  nlohmann::json reports = nlohmann::json::array();
  for (const spool::WorkerHealthReport& report : in.workers.reports) {
    // Expired reports are not relayed: the console must not show a worker as fine on the
    // strength of what it said minutes ago.
    if (!report.fresh)
      continue;
    Result<nlohmann::json> parsed = wire::ParseJson(report.payload, WorkerHealthLimits());
    if (!parsed.ok() || !parsed->is_object())
      continue;
    const nlohmann::json& health = *parsed;
    if (report.host != in.controller_host && health.contains("inventory")) {
      nodes.push_back(
          NodeEntry(report.host, health["inventory"],
                    health.contains("gpu_use") ? health["gpu_use"] : nlohmann::json::array()));
    }
    int64_t last_sample_ms = 0;
    if (health.contains("last_sample_ms") &&
        !wire::IntegerIn(health["last_sample_ms"], 0, wire::kMaxTimeMs, &last_sample_ms)) {
      last_sample_ms = 0;
    }
    nlohmann::json entry = {{"host", report.host}, {"last_sample_ms", last_sample_ms}};
    if (health.contains("capabilities") && health["capabilities"].is_object()) {
      entry["capabilities"] = CleanCapabilities(health["capabilities"]);
    }
    reports.push_back(std::move(entry));
  }
  return {{"version", 1},
          {"daemon_version", in.daemon_version},
          {"controller_host", in.controller_host},
          {"nodes", std::move(nodes)},
          {"capabilities", in.controller_capabilities},
          {"workers",
           {{"sampled", in.workers.fresh}, {"expected", in.workers.hosts}, {"reports", reports}}},
          {"outbox", in.outbox},
          {"diagnostics", in.diagnostics}};
}

}  // namespace expanse::agent
