// Builds the controller's heartbeat document (docs/formats/heartbeat.md) from the controller's
// own node, the workers' health reports as the aggregator read them, and the outbox counters.
#ifndef EXPANSE_AGENT_HEARTBEAT_BUILDER_H_
#define EXPANSE_AGENT_HEARTBEAT_BUILDER_H_

#include <string>

#include <nlohmann/json.hpp>

#include "gpu/backend.h"
#include "spool/aggregator.h"

namespace expanse::agent {

struct HeartbeatInputs {
  std::string daemon_version;
  std::string controller_host;
  gpu::Inventory controller_inventory;
  nlohmann::json controller_gpu_use = nlohmann::json::array();  // NodeCollector::GpuUse()
  nlohmann::json controller_capabilities = nlohmann::json::object();
  spool::WorkerHealthSnapshot workers;
  nlohmann::json outbox = nlohmann::json::object();       // non-negative integer counters
  nlohmann::json diagnostics = nlohmann::json::object();  // ≤ 64 KiB
};

nlohmann::json BuildHeartbeat(const HeartbeatInputs& inputs);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_HEARTBEAT_BUILDER_H_
