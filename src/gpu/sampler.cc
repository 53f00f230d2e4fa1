#include "gpu/sampler.h"

#include <algorithm>
#include <utility>

namespace expanse::gpu {

Sampler::Sampler(std::unique_ptr<GuardedBackend> backend, std::string no_backend_reason,
                 Clock& clock, SampleSink& sink)
    : backend_(std::move(backend)),
      no_backend_reason_(std::move(no_backend_reason)),
      clock_(clock),
      sink_(sink) {
  if (backend_ == nullptr) {
    SetState("no_gpus", "no GPUs: " + no_backend_reason_);
  } else {
    health_.backend = backend_->name();
    SetState("ok", "");
  }
}

void Sampler::SetState(std::string state, std::string detail) {
  std::lock_guard lock(mu_);
  health_.state = std::move(state);
  health_.detail = std::move(detail);
  health_.gpus = gpu_count_;
}

bool Sampler::EnsureInventory(int64_t now_ms) {
  if (have_inventory_)
    return true;
  Result<Inventory> inventory = backend_->ReadInventory();
  if (!inventory.ok()) {
    SetState("degraded", inventory.status().message());
    return false;
  }
  have_inventory_ = true;
  gpu_count_ = inventory->gpus.size();
  sink_.OnInventory(now_ms, *inventory);
  return true;
}

void Sampler::TickFast() {
  if (backend_ == nullptr)
    return;
  const int64_t now_ms = clock_.NowMs();
  if (!EnsureInventory(now_ms)) {
    sink_.OnFastFailed(now_ms);
    return;
  }
  if (gpu_count_ == 0) {
    SetState("no_gpus", "no GPUs: " + backend_->name() + " reports none on this node");
    return;
  }
  Result<std::vector<GpuReading>> readings = backend_->ReadFast();
  if (!readings.ok()) {
    sink_.OnFastFailed(now_ms);
    SetState("degraded", readings.status().message());
    return;
  }
  // A GPU that appeared or vanished (hot reset, fallen off the bus) changes the inventory.
  if (readings->size() != gpu_count_)
    have_inventory_ = false;
  Result<std::vector<GpuProcess>> processes = backend_->ReadProcesses();
  sink_.OnFast(now_ms, *readings, processes);
  {
    std::lock_guard lock(mu_);
    health_.last_ok_ms = now_ms;
  }
  if (!processes.ok()) {
    SetState("degraded", "GPU processes unknown: " + processes.status().message());
  } else {
    SetState("ok", "");
  }
}

void Sampler::TickSlow() {
  if (backend_ == nullptr || !have_inventory_ || gpu_count_ == 0)
    return;
  const int64_t now_ms = clock_.NowMs();
  if (Result<std::vector<SlowReading>> energy = backend_->ReadEnergy(); energy.ok()) {
    sink_.OnEnergy(now_ms, *energy);
  }
  Result<std::vector<ProcessUtilization>> util =
      backend_->ReadProcessUtilization(last_process_sample_us_);
  if (util.ok()) {
    for (const ProcessUtilization& u : *util) {
      last_process_sample_us_ = std::max(last_process_sample_us_, u.timestamp_us);
    }
    if (!util->empty())
      sink_.OnProcessUtilization(now_ms, *util);
  }
}

SamplerHealth Sampler::Health() const {
  std::lock_guard lock(mu_);
  SamplerHealth health = health_;
  if (backend_ != nullptr) {
    if (std::optional<std::string> stuck = backend_->StuckCall()) {
      health.state = "degraded";
      health.detail = backend_->name() + " " + *stuck + " (driver hung?)";
    }
  }
  return health;
}

}  // namespace expanse::gpu
