#include "agent/heartbeat_builder.h"

#include "agent/gpu_json.h"

namespace expanse::agent {
namespace {

// The use view entry of `uuid` without its uuid: {"state", "jobs", "processes"}; null if none.
nlohmann::json UseOf(const nlohmann::json& gpu_use, const nlohmann::json& uuid) {
  if (!gpu_use.is_array())
    return nullptr;
  for (const auto& u : gpu_use) {
    if (u.is_object() && u.contains("uuid") && u["uuid"] == uuid) {
      nlohmann::json use = u;
      use.erase("uuid");
      return use;
    }
  }
  return nullptr;
}

nlohmann::json NodeEntry(const std::string& host, const nlohmann::json& inventory,
                         const nlohmann::json& gpu_use) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : inventory.value("gpus", nlohmann::json::array())) {
    if (!g.contains("uuid"))
      continue;
    nlohmann::json gpu = {{"uuid", g["uuid"]}};
    for (const char* key : {"index", "minor", "memory_total_mib"}) {
      if (g.contains(key) && g[key].is_number_unsigned())
        gpu[key] = g[key];
    }
    if (g.contains("name"))
      gpu["model"] = g["name"];
    if (inventory.contains("driver_version") &&
        !inventory["driver_version"].get<std::string>().empty()) {
      gpu["driver"] = inventory["driver_version"];
    }
    if (nlohmann::json use = UseOf(gpu_use, g["uuid"]); !use.is_null())
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
    const nlohmann::json health = nlohmann::json::parse(report.payload, nullptr, false);
    if (!health.is_object())
      continue;
    if (report.host != in.controller_host && health.contains("inventory")) {
      nodes.push_back(NodeEntry(report.host, health["inventory"],
                                health.value("gpu_use", nlohmann::json::array())));
    }
    nlohmann::json entry = {{"host", report.host},
                            {"last_sample_ms", health.value("last_sample_ms", int64_t{0})}};
    if (health.contains("capabilities") && health["capabilities"].is_object()) {
      entry["capabilities"] = health["capabilities"];
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
