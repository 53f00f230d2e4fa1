#include "agent/gpu_json.h"

#include <cstdint>
#include <limits>
#include <optional>

namespace expanse::agent {
namespace {

template <typename T>
void Put(nlohmann::json& out, const char* name, const std::optional<T>& value) {
  if (value)
    out[name] = *value;
}

bool IsUint32(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_number_unsigned() &&
         it->get<uint64_t>() <= std::numeric_limits<uint32_t>::max();
}

}  // namespace

nlohmann::json ToJson(const gpu::Inventory& inventory) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const gpu::GpuInfo& g : inventory.gpus) {
    nlohmann::json item = {
        {"index", g.index}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id}, {"name", g.name}};
    Put(item, "minor", g.minor);
    Put(item, "memory_total_mib", g.memory_total_mib);
    gpus.push_back(std::move(item));
  }
  return {{"backend", inventory.backend},
          {"driver_version", inventory.driver_version},
          {"library_version", inventory.library_version},
          {"gpus", std::move(gpus)}};
}

std::vector<gpu::GpuInfo> GpusFromJson(const nlohmann::json& inventory) {
  std::vector<gpu::GpuInfo> out;
  if (!inventory.is_object() || !inventory.contains("gpus") || !inventory["gpus"].is_array())
    return out;
  for (const auto& g : inventory["gpus"]) {
    // A worker wrote this: a number past uint32_t is refused, not cut to another GPU's.
    if (!g.is_object() || !g.contains("uuid") || !g["uuid"].is_string() || !IsUint32(g, "index")) {
      continue;
    }
    gpu::GpuInfo info;
    info.uuid = g["uuid"].get<std::string>();
    info.index = static_cast<uint32_t>(g["index"].get<uint64_t>());
    if (IsUint32(g, "minor"))
      info.minor = static_cast<uint32_t>(g["minor"].get<uint64_t>());
    if (g.contains("name") && g["name"].is_string())
      info.name = g["name"].get<std::string>();
    out.push_back(std::move(info));
  }
  return out;
}

nlohmann::json ToJson(const gpu::GpuReading& r) {
  nlohmann::json out = {{"uuid", r.uuid}};
  Put(out, "sm_util", r.sm_util);
  Put(out, "mem_util", r.mem_util);
  Put(out, "mem_used_mib", r.mem_used_mib);
  Put(out, "power_w", r.power_w);
  Put(out, "temp_c", r.temp_c);
  Put(out, "sm_clock_mhz", r.sm_clock_mhz);
  Put(out, "mem_clock_mhz", r.mem_clock_mhz);
  Put(out, "clock_event_reasons", r.clock_event_reasons);
  Put(out, "ecc_corrected", r.ecc_corrected);
  Put(out, "ecc_uncorrected", r.ecc_uncorrected);
  return out;
}

nlohmann::json ToJson(const gpu::GpuProcess& p) {
  nlohmann::json out = {{"pid", p.pid}, {"gpu_uuid", p.gpu_uuid}};
  Put(out, "used_memory_mib", p.used_memory_mib);
  return out;
}

nlohmann::json ToJson(const gpu::SlowReading& r) {
  nlohmann::json out = {{"uuid", r.uuid}};
  Put(out, "energy_mj", r.energy_mj);
  return out;
}

nlohmann::json ToJson(const gpu::ProcessUtilization& u) {
  return {{"pid", u.pid},
          {"gpu_uuid", u.gpu_uuid},
          {"sm_util", u.sm_util},
          {"mem_util", u.mem_util},
          {"timestamp_us", u.timestamp_us}};
}

}  // namespace expanse::agent
