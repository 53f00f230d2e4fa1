// Synthetic GPU telemetry shaped like the H200 readings in
// /work/shared/fixtures/gpu/h200 (nvidia-smi query, dmon, NVML): utilisation that sits
// at 0 when idle and near 100 when busy, memory in MiB changing in steps, power in W
// with two decimals, temperatures, clocks constant for long stretches, an energy
// counter that only grows, constant ECC/limits fields. Deterministic for a seed.
#ifndef EXPANSE_BENCH_TSDB_TELEMETRY_H_
#define EXPANSE_BENCH_TSDB_TELEMETRY_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tsdb/sample.h"
#include "tsdb/wal_record.h"

namespace expanse::bench {

inline constexpr int kGpusPerNode = 8;
inline constexpr const char* kFields[] = {
    "gpu_util_pct",     "mem_util_pct",     "mem_used_mib",  "mem_free_mib", "temp_gpu_c",
    "temp_mem_c",       "power_w",          "power_limit_w", "sm_clock_mhz", "mem_clock_mhz",
    "max_sm_clock_mhz", "energy_mj",        "pcie_tx_kbps",  "pcie_rx_kbps", "ecc_corrected",
    "ecc_uncorrected",  "throttle_reasons", "pstate",        "sm_occupancy", "nvlink_tx_kbps"};
inline constexpr int kFieldCount = 20;

class TelemetryGenerator {
 public:
  TelemetryGenerator(int nodes, uint64_t seed) : rng_(seed), gpus_(nodes * kGpusPerNode) {
    for (int n = 0; n < nodes; ++n) {
      for (int g = 0; g < kGpusPerNode; ++g) {
        for (const char* field : kFields) {
          keys_.push_back({"cluster-a", "node" + std::to_string(n),
                           "GPU-" + std::to_string(n) + "-" + std::to_string(g), field});
        }
      }
    }
  }
  const std::vector<tsdb::SeriesKey>& keys() const { return keys_; }

  // One second of readings for every series, as one batch.
  tsdb::Batch Next(int64_t t_ms) {
    tsdb::Batch batch;
    batch.reserve(keys_.size());
    for (size_t g = 0; g < gpus_.size(); ++g) {
      Gpu& gpu = gpus_[g];
      Step(gpu);
      const double v[kFieldCount] = {gpu.util,
                                     gpu.busy ? std::round(gpu.util * 0.3) : 0,
                                     gpu.mem_used,
                                     143771 - gpu.mem_used - 615,
                                     gpu.temp,
                                     gpu.temp + 4,
                                     gpu.power,
                                     700.0,
                                     gpu.sm_clock,
                                     3201,
                                     1980,
                                     gpu.energy_mj,
                                     gpu.busy ? std::round(Uniform(1e5, 4e5)) : 0,
                                     gpu.busy ? std::round(Uniform(1e5, 4e5)) : 0,
                                     0,
                                     0,
                                     gpu.busy ? 4.0 : 1.0,
                                     0,
                                     gpu.busy ? std::round(Uniform(40, 80)) / 100 : 0,
                                     gpu.busy ? std::round(Uniform(1e6, 2e6)) : 0};
      for (int f = 0; f < kFieldCount; ++f) {
        batch.push_back({keys_[g * kFieldCount + f], {{t_ms, v[f]}}});
      }
    }
    return batch;
  }

 private:
  struct Gpu {
    bool busy = false;
    int phase_left_s = 0;
    double util = 0, mem_used = 0, temp = 33, power = 81.72, sm_clock = 345, energy_mj = 4.2e9;
  };

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng_); }

  void Step(Gpu& gpu) {
    if (gpu.phase_left_s-- <= 0) {
      gpu.busy = !gpu.busy;
      gpu.phase_left_s = static_cast<int>(Uniform(600, 3600));
      gpu.mem_used = gpu.busy ? std::round(Uniform(8000, 140000)) : 0;
    }
    if (gpu.busy) {
      gpu.util = Uniform(0, 1) < 0.9 ? 100 : std::round(Uniform(60, 100));
      if (Uniform(0, 1) < 0.01)
        gpu.mem_used += 2 * std::round(Uniform(-512, 512));
      gpu.power = std::round(Uniform(600, 700) * 100) / 100;
      gpu.sm_clock = Uniform(0, 1) < 0.02 ? 1455 : 1980;
      gpu.temp = std::min(75.0, gpu.temp + (Uniform(0, 1) < 0.05 ? 1 : 0));
    } else {
      gpu.util = 0;
      gpu.power = std::round(Uniform(81, 83) * 100) / 100;
      gpu.sm_clock = 345;
      gpu.temp = std::max(33.0, gpu.temp - (Uniform(0, 1) < 0.05 ? 1 : 0));
    }
    gpu.energy_mj += std::round(gpu.power * 1000);
  }

  std::mt19937_64 rng_;
  std::vector<Gpu> gpus_;
  std::vector<tsdb::SeriesKey> keys_;
};

}  // namespace expanse::bench

#endif  // EXPANSE_BENCH_TSDB_TELEMETRY_H_
