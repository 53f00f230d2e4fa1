// Sampler: reads the node's GPUs on two cadences and hands the readings to a sink.
//
//   TickFast (every second): utilisation, memory, power, temperature, clocks, clock-event
//     reasons, ECC, and the processes holding each GPU. Microseconds per GPU with NVML.
//   TickSlow (every ten seconds by default): energy counters and per-process utilisation,
//     milliseconds per GPU, so they never ride on the per-second path.
//
// Both go through a GuardedBackend, so a hung driver call costs one tick's deadline and is
// then reported, not waited on. The caller (the daemon's loop, or a test with a ManualClock)
// decides when to tick; the sampler keeps no thread of its own.
#ifndef EXPANSE_GPU_SAMPLER_H_
#define EXPANSE_GPU_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "gpu/guarded_backend.h"

namespace expanse::gpu {

class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void OnInventory(int64_t at_ms, const Inventory& inventory) = 0;
  // `processes`: the GPUs' processes, or why they could not be listed (then unknown, not
  // none: nothing may read "no process" from it).
  virtual void OnFast(int64_t at_ms, const std::vector<GpuReading>& readings,
                      const Result<std::vector<GpuProcess>>& processes) = 0;
  // A fast tick that read nothing (no inventory, or the readings failed or hung): what was
  // known of the GPUs' processes is no longer current.
  virtual void OnFastFailed(int64_t /*at_ms*/) {}
  virtual void OnEnergy(int64_t at_ms, const std::vector<SlowReading>& readings) = 0;
  virtual void OnProcessUtilization(int64_t at_ms,
                                    const std::vector<ProcessUtilization>& samples) = 0;
};

// What the sampler is doing, for health and diagnostics.
struct SamplerHealth {
  std::string backend;  // "nvml", "nvidia-smi", or "" when there is none
  size_t gpus = 0;
  // "ok"; "no_gpus" (no backend, or one that sees no GPU); "degraded" (the last reading failed
  // or a call is stuck).
  std::string state;
  std::string detail;  // why, in words an operator can act on
  int64_t last_ok_ms = 0;
};

class Sampler {
 public:
  // `backend` may be null: the node has no usable GPU backend, and `no_backend_reason` says
  // why (e.g. neither libnvidia-ml.so.1 nor nvidia-smi found).
  Sampler(std::unique_ptr<GuardedBackend> backend, std::string no_backend_reason, Clock& clock,
          SampleSink& sink);

  void TickFast();
  void TickSlow();
  SamplerHealth Health() const;

 private:
  bool EnsureInventory(int64_t now_ms);
  void SetState(std::string state, std::string detail);

  std::unique_ptr<GuardedBackend> backend_;
  std::string no_backend_reason_;
  Clock& clock_;
  SampleSink& sink_;
  bool have_inventory_ = false;
  size_t gpu_count_ = 0;
  uint64_t last_process_sample_us_ = 0;
  mutable std::mutex mu_;  // guards health_: the heartbeat reads it from another thread
  SamplerHealth health_;
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_SAMPLER_H_
