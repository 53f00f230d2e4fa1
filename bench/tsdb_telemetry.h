// Synthetic GPU telemetry shaped like the H200 readings in
// /work/shared/fixtures/gpu/h200 (nvidia-smi query, dmon, NVML). Each GPU alternates
// busy and idle phases of 10-60 minutes. Idle: utilisation 0, 0 MiB used, ~81.7 W,
// 345 MHz, 33 C. Busy: a job picks steady levels (SM 100 % or 85-99 %, 24-26 % memory
// utilisation, 8-140 GiB in MiB, ~600-695 W) that the readings hold with small integer
// jitter; power has two decimals and wanders by a few W, as real power draw does;
// temperatures are integers that drift by 1 C; clocks stay constant for long stretches
// (1980 MHz, dropping to 1455-1515 under the power cap, with the matching clock-event
// bit); energy is a counter that only grows; limits, ECC counters and the P-state are
// constant. Deterministic for a seed. Metric names follow docs/formats/metrics.md.
#ifndef EXPANSE_BENCH_TSDB_TELEMETRY_H_
#define EXPANSE_BENCH_TSDB_TELEMETRY_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tsdb/sample.h"
#include "tsdb/wal_record.h"

namespace expanse::bench {

inline constexpr int kGpusPerNode = 8;
inline constexpr int kFieldCount = 20;
inline constexpr const char* kFields[kFieldCount] = {"gpu.sm_util",
                                                     "gpu.mem_util",
                                                     "gpu.mem_used_mib",
                                                     "gpu.mem_free_mib",
                                                     "gpu.temp_c",
                                                     "gpu.mem_temp_c",
                                                     "gpu.power_w",
                                                     "gpu.power_limit_w",
                                                     "gpu.sm_clock_mhz",
                                                     "gpu.mem_clock_mhz",
                                                     "gpu.max_sm_clock_mhz",
                                                     "gpu.energy_mj",
                                                     "gpu.pcie_rx_mbps",
                                                     "gpu.pcie_tx_mbps",
                                                     "gpu.ecc_corrected",
                                                     "gpu.ecc_uncorrected",
                                                     "gpu.clock_event_reasons",
                                                     "gpu.pstate",
                                                     "gpu.tensor_active",
                                                     "gpu.dram_active"};

class TelemetryGenerator {
 public:
  TelemetryGenerator(int nodes, uint64_t seed, std::string host_prefix = "node")
      : rng_(seed), gpus_(static_cast<size_t>(nodes) * kGpusPerNode) {
    for (int n = 0; n < nodes; ++n) {
      for (int g = 0; g < kGpusPerNode; ++g) {
        for (const char* field : kFields) {
          keys_.push_back({"cluster-a", host_prefix + std::to_string(n),
                           "GPU-" + std::to_string(n) + "-" + std::to_string(g), field});
        }
      }
    }
  }
  const std::vector<tsdb::SeriesKey>& keys() const { return keys_; }

  // The kFieldCount readings of GPU `g` at the next second, in kFields order.
  void NextGpu(size_t g, double* v) {
    Gpu& gpu = gpus_[g];
    Step(gpu);
    const double values[kFieldCount] = {gpu.util,
                                        gpu.mem_util,
                                        gpu.mem_used,
                                        143771 - 615 - gpu.mem_used,
                                        gpu.temp,
                                        gpu.temp - 9,
                                        gpu.power,
                                        700,
                                        gpu.sm_clock,
                                        3201,
                                        1980,
                                        gpu.energy_mj,
                                        gpu.pcie_rx,
                                        gpu.pcie_tx,
                                        0,
                                        0,
                                        gpu.reasons,
                                        0,
                                        gpu.tensor,
                                        gpu.dram};
    std::copy(values, values + kFieldCount, v);
  }

  // One second of readings for every series, as one batch.
  tsdb::Batch Next(int64_t t_ms) {
    tsdb::Batch batch;
    batch.Reserve(keys_.size(), keys_.size(), 0);
    double v[kFieldCount];
    for (size_t g = 0; g < gpus_.size(); ++g) {
      NextGpu(g, v);
      for (int f = 0; f < kFieldCount; ++f) {
        const tsdb::Sample sample{t_ms, v[f]};
        batch.Add(keys_[g * kFieldCount + f], {&sample, 1});
      }
    }
    return batch;
  }

 private:
  struct Gpu {
    bool busy = false;
    int phase_left_s = 0;
    // Levels a busy phase holds; the readings jitter around them.
    double util_level = 0, mem_util_level = 0, power_level = 0, tensor_level = 0;
    double util = 0, mem_util = 0, mem_used = 0, temp = 33, power = 81.72, sm_clock = 345;
    double energy_mj = 4.2e9, pcie_rx = 0, pcie_tx = 0, reasons = 1, tensor = 0, dram = 0;
  };

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng_); }
  bool Chance(double p) { return Uniform(0, 1) < p; }
  // The double nearest to v rounded to two decimals, as a reading of hundredths (or NVML's
  // milliwatts / 1000.0) gives it. Not round(v / 0.01) * 0.01: that product is often a
  // neighbouring double (612.3700000000001), a value no sensor reports.
  double Hundredths(double v) { return std::round(v * 100) / 100; }

  void StartPhase(Gpu& gpu) {
    gpu.busy = !gpu.busy;
    gpu.phase_left_s = static_cast<int>(Uniform(600, 3600));
    gpu.util_level = Chance(0.6) ? 100 : std::round(Uniform(85, 99));
    gpu.mem_util_level = std::round(Uniform(20, 40));
    gpu.power_level = Uniform(600, 695);
    gpu.tensor_level = Hundredths(Uniform(0.3, 0.8));
    gpu.mem_used = gpu.busy ? 2 * std::round(Uniform(4000, 70000)) : 0;
    gpu.sm_clock = gpu.busy ? 1980 : 345;
    gpu.reasons = gpu.busy ? 0 : 1;
  }

  void Step(Gpu& gpu) {
    if (gpu.phase_left_s-- <= 0)
      StartPhase(gpu);
    if (!gpu.busy) {
      gpu.util = gpu.mem_util = gpu.pcie_rx = gpu.pcie_tx = gpu.tensor = gpu.dram = 0;
      gpu.power = Hundredths(81.72 + Uniform(-0.3, 0.3));
      if (gpu.temp > 33 && Chance(0.02))
        gpu.temp -= 1;
    } else {
      // Steady readings with rare small dips, as a training loop shows.
      gpu.util = Chance(0.05) ? gpu.util_level - std::round(Uniform(1, 8)) : gpu.util_level;
      gpu.mem_util = gpu.mem_util_level + (Chance(0.2) ? std::round(Uniform(-1, 1)) : 0);
      if (Chance(0.002))
        gpu.mem_used += 2 * std::round(Uniform(-256, 256));
      gpu.power = Hundredths(std::clamp(gpu.power_level + Uniform(-4, 4), 60.0, 700.0));
      if (Chance(0.01)) {
        // Power cap reached or released: the clock steps and stays there.
        const double clocks[] = {1980, 1980, 1515, 1455, 1440};
        gpu.sm_clock = clocks[static_cast<int>(Uniform(0, 5))];
        gpu.reasons = gpu.sm_clock < 1980 ? 4 : 0;
      }
      if (gpu.temp < 53 && Chance(0.05))
        gpu.temp += 1;
      gpu.pcie_rx = 17 + (Chance(0.3) ? std::round(Uniform(-1, 1)) : 0);
      gpu.pcie_tx = 8 + (Chance(0.3) ? std::round(Uniform(-1, 1)) : 0);
      gpu.tensor =
          Chance(0.1) ? Hundredths(gpu.tensor_level + Uniform(-0.02, 0.02)) : gpu.tensor_level;
      gpu.dram = Hundredths(gpu.mem_util / 100);
    }
    gpu.energy_mj += std::round(gpu.power * 1000);
  }

  std::mt19937_64 rng_;
  std::vector<Gpu> gpus_;
  std::vector<tsdb::SeriesKey> keys_;
};

}  // namespace expanse::bench

#endif  // EXPANSE_BENCH_TSDB_TELEMETRY_H_
