#include "agent/gpu_report.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "agent/gpu_json.h"

namespace expanse::agent {
namespace {

using Micros = std::chrono::duration<double, std::micro>;

// Runs `call` `repeat` times; median and max wall time in microseconds.
nlohmann::json Time(int repeat, const std::function<bool()>& call) {
  std::vector<double> us;
  int failures = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!call())
      ++failures;
    us.push_back(Micros(std::chrono::steady_clock::now() - start).count());
  }
  if (us.empty())
    return nullptr;
  std::sort(us.begin(), us.end());
  return {{"calls", repeat},
          {"failures", failures},
          {"median_us", us[us.size() / 2]},
          {"max_us", us.back()}};
}

template <typename T>
nlohmann::json ValueOrError(const Result<T>& result) {
  if (result.ok())
    return ToJson(*result);
  return {{"error", result.status().message()}, {"reason", result.status().reason()}};
}

}  // namespace

nlohmann::json GpuReport(const gpu::BackendChoice& choice, int repeat) {
  nlohmann::json report = {{"requested_backend", choice.kind}};
  gpu::SelectedBackend selected = gpu::SelectBackend(choice);
  report["refusals"] = selected.refusals;
  if (selected.backend == nullptr) {
    report["backend"] = nullptr;
    report["state"] = "no_gpus";
    report["detail"] = "no GPUs: " + selected.NoBackendReason();
    return report;
  }
  gpu::Backend& b = *selected.backend;
  report["backend"] = std::string(b.Name());
  Result<gpu::Inventory> inventory = b.ReadInventory();
  report["inventory"] = ValueOrError(inventory);
  report["state"] = inventory.ok() && !inventory->gpus.empty() ? "ok" : "no_gpus";
  report["fast"] = ValueOrError(b.ReadFast());
  report["processes"] = ValueOrError(b.ReadProcesses());
  report["energy"] = ValueOrError(b.ReadEnergy());
  report["process_utilization"] = ValueOrError(b.ReadProcessUtilization(0));
  if (repeat > 0) {
    // The slow calls are timed fewer times: each takes milliseconds (or a second for pmon).
    const int slow_repeat = std::max(1, repeat / 20);
    report["timing"] = {
        {"inventory", Time(slow_repeat, [&] { return b.ReadInventory().ok(); })},
        {"fast", Time(repeat, [&] { return b.ReadFast().ok(); })},
        {"processes", Time(repeat, [&] { return b.ReadProcesses().ok(); })},
        {"energy", Time(slow_repeat, [&] { return b.ReadEnergy().ok(); })},
        {"process_utilization",
         Time(slow_repeat, [&] { return b.ReadProcessUtilization(0).ok(); })},
    };
  }
  return report;
}

std::string FormatGpuReport(const nlohmann::json& report) {
  std::string out;
  if (report["backend"].is_null()) {
    return fmt::format("state: no_gpus\n{}\n", report.value("detail", std::string()));
  }
  out += fmt::format("backend: {}\n", report["backend"].get<std::string>());
  for (const auto& refusal : report["refusals"]) {
    out += fmt::format("  (not used: {})\n", refusal.get<std::string>());
  }
  const nlohmann::json& inventory = report["inventory"];
  if (inventory.contains("error")) {
    out += fmt::format("inventory: {}\n", inventory["error"].get<std::string>());
    return out;
  }
  out += fmt::format("driver: {}  library: {}\n", inventory.value("driver_version", ""),
                     inventory.value("library_version", ""));
  for (const auto& g : inventory["gpus"]) {
    out += fmt::format("gpu {} minor {} {} {} {} MiB {}\n", g["index"].get<int>(),
                       g.contains("minor") ? std::to_string(g["minor"].get<int>()) : "?",
                       g.value("uuid", ""), g.value("name", ""),
                       g.contains("memory_total_mib") ? g["memory_total_mib"].dump() : "?",
                       g.value("pci_bus_id", ""));
  }
  out += "readings: " + report["fast"].dump() + "\n";
  out += "processes: " + report["processes"].dump() + "\n";
  out += "energy: " + report["energy"].dump() + "\n";
  out += "process utilization: " + report["process_utilization"].dump() + "\n";
  if (report.contains("timing")) {
    for (const auto& [name, t] : report["timing"].items()) {
      if (t.is_null())
        continue;
      out +=
          fmt::format("time {:<20} median {:>10.1f} us  max {:>10.1f} us  ({} calls, {} failed)\n",
                      name, t["median_us"].get<double>(), t["max_us"].get<double>(),
                      t["calls"].get<int>(), t["failures"].get<int>());
    }
  }
  return out;
}

}  // namespace expanse::agent
