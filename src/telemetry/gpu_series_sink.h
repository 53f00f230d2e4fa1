// GpuSeriesSink: turns the sampler's readings into named series (docs/formats/metrics.md) and
// remembers the latest inventory and GPU processes for attribution and health.
#ifndef EXPANSE_TELEMETRY_GPU_SERIES_SINK_H_
#define EXPANSE_TELEMETRY_GPU_SERIES_SINK_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/sampler.h"
#include "telemetry/series_buffer.h"

namespace expanse::telemetry {

class GpuSeriesSink : public gpu::SampleSink {
 public:
  GpuSeriesSink(std::string host, SeriesBuffer& buffer, std::mutex& buffer_mu)
      : host_(std::move(host)), buffer_(buffer), buffer_mu_(buffer_mu) {}

  void OnInventory(int64_t at_ms, const gpu::Inventory& inventory) override;
  void OnFast(int64_t at_ms, const std::vector<gpu::GpuReading>& readings,
              const Result<std::vector<gpu::GpuProcess>>& processes) override;
  void OnFastFailed(int64_t at_ms) override;
  void OnEnergy(int64_t at_ms, const std::vector<gpu::SlowReading>& readings) override;
  void OnProcessUtilization(int64_t at_ms,
                            const std::vector<gpu::ProcessUtilization>& samples) override;

  gpu::Inventory inventory() const;
  // The latest list; nullopt when it could not be read (unknown, not none).
  std::optional<std::vector<gpu::GpuProcess>> processes() const;
  std::vector<gpu::ProcessUtilization> process_utilization() const;
  // The last SM utilisation (percent) of each GPU that reported one, by UUID.
  std::map<std::string, double> latest_sm_util() const;

 private:
  std::string host_;
  SeriesBuffer& buffer_;
  std::mutex& buffer_mu_;
  mutable std::mutex mu_;
  gpu::Inventory inventory_;
  std::optional<std::vector<gpu::GpuProcess>> processes_;
  std::vector<gpu::ProcessUtilization> process_utilization_;
  std::map<std::string, double> latest_sm_util_;
};

}  // namespace expanse::telemetry

#endif  // EXPANSE_TELEMETRY_GPU_SERIES_SINK_H_
