#include "telemetry/gpu_series_sink.h"

#include <optional>

namespace expanse::telemetry {
namespace {

template <typename T>
void AddIf(SeriesBuffer& buffer, const SeriesKey& key, int64_t at_ms,
           const std::optional<T>& value) {
  if (value)
    buffer.Add(key, at_ms, static_cast<double>(*value));
}

}  // namespace

void GpuSeriesSink::OnInventory(int64_t /*at_ms*/, const gpu::Inventory& inventory) {
  std::lock_guard lock(mu_);
  inventory_ = inventory;
}

void GpuSeriesSink::OnFast(int64_t at_ms, const std::vector<gpu::GpuReading>& readings,
                           const Result<std::vector<gpu::GpuProcess>>& processes) {
  {
    std::lock_guard lock(buffer_mu_);
    for (const gpu::GpuReading& r : readings) {
      auto key = [&](const char* metric) { return SeriesKey{host_, r.uuid, metric}; };
      AddIf(buffer_, key("gpu.sm_util"), at_ms, r.sm_util);
      AddIf(buffer_, key("gpu.mem_util"), at_ms, r.mem_util);
      AddIf(buffer_, key("gpu.mem_used_mib"), at_ms, r.mem_used_mib);
      AddIf(buffer_, key("gpu.power_w"), at_ms, r.power_w);
      AddIf(buffer_, key("gpu.temp_c"), at_ms, r.temp_c);
      AddIf(buffer_, key("gpu.sm_clock_mhz"), at_ms, r.sm_clock_mhz);
      AddIf(buffer_, key("gpu.mem_clock_mhz"), at_ms, r.mem_clock_mhz);
      AddIf(buffer_, key("gpu.clock_event_reasons"), at_ms, r.clock_event_reasons);
      AddIf(buffer_, key("gpu.ecc_corrected"), at_ms, r.ecc_corrected);
      AddIf(buffer_, key("gpu.ecc_uncorrected"), at_ms, r.ecc_uncorrected);
    }
  }
  std::lock_guard lock(mu_);
  processes_.reset();
  if (processes.ok())
    processes_ = *processes;
  for (const gpu::GpuReading& r : readings) {
    if (r.sm_util)
      latest_sm_util_[r.uuid] = *r.sm_util;
  }
}

void GpuSeriesSink::OnFastFailed(int64_t /*at_ms*/) {
  std::lock_guard lock(mu_);
  processes_.reset();  // a job started since would read as having none
}

std::map<std::string, double> GpuSeriesSink::latest_sm_util() const {
  std::lock_guard lock(mu_);
  return latest_sm_util_;
}

void GpuSeriesSink::OnEnergy(int64_t at_ms, const std::vector<gpu::SlowReading>& readings) {
  std::lock_guard lock(buffer_mu_);
  for (const gpu::SlowReading& r : readings) {
    AddIf(buffer_, SeriesKey{host_, r.uuid, "gpu.energy_mj"}, at_ms, r.energy_mj);
  }
}

void GpuSeriesSink::OnProcessUtilization(int64_t /*at_ms*/,
                                         const std::vector<gpu::ProcessUtilization>& samples) {
  std::lock_guard lock(mu_);
  process_utilization_ = samples;
}

gpu::Inventory GpuSeriesSink::inventory() const {
  std::lock_guard lock(mu_);
  return inventory_;
}

std::optional<std::vector<gpu::GpuProcess>> GpuSeriesSink::processes() const {
  std::lock_guard lock(mu_);
  return processes_;
}

std::vector<gpu::ProcessUtilization> GpuSeriesSink::process_utilization() const {
  std::lock_guard lock(mu_);
  return process_utilization_;
}

}  // namespace expanse::telemetry
