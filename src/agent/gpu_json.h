// JSON forms of the GPU backend's types, shared by diagnostics and the spool records.
#ifndef EXPANSE_AGENT_GPU_JSON_H_
#define EXPANSE_AGENT_GPU_JSON_H_

#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/backend.h"

namespace expanse::agent {

nlohmann::json ToJson(const gpu::Inventory& inventory);
nlohmann::json ToJson(const gpu::GpuReading& reading);
nlohmann::json ToJson(const gpu::GpuProcess& process);
nlohmann::json ToJson(const gpu::SlowReading& reading);
nlohmann::json ToJson(const gpu::ProcessUtilization& sample);

// The GPUs of an inventory as ToJson wrote it, read back from a worker's health report (input
// from the shared mount: entries without a string uuid, or with a wrong-typed field, are
// skipped, never trusted).
std::vector<gpu::GpuInfo> GpusFromJson(const nlohmann::json& inventory);

template <typename T>
nlohmann::json ToJson(const std::vector<T>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items)
    out.push_back(ToJson(item));
  return out;
}

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_GPU_JSON_H_
