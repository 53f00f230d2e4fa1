// Test helpers for code that calls a GPU backend through a GuardedBackend: a backend answering
// from memory whose ReadFast the test can hold blocked, as a hung driver keeps a call, and then
// release. The test decides when the call returns, so nothing waits on a timer.
#ifndef EXPANSE_GPU_HELD_BACKEND_TEST_UTIL_H_
#define EXPANSE_GPU_HELD_BACKEND_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/backend.h"

namespace expanse::gpu::testing {

// Bounds every wait in these helpers. It only stops a broken test from hanging: a passing test
// never reaches it.
inline constexpr std::chrono::seconds kHangBound{10};

// Polls `condition` until it holds (true) or kHangBound passes (false). For state that has no
// event to wait on, such as a GuardedBackend lane becoming free after its call returned.
inline bool WaitUntil(const std::function<bool()>& condition) {
  const auto give_up = std::chrono::steady_clock::now() + kHangBound;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// What a test shares with its HeldBackend. Shared because the backend may outlive the test's
// other objects: a GuardedBackend destroyed while a call is stuck leaves the backend to the
// thread of that call. Thread-safe.
class CallHold {
 public:
  // ReadFast calls that start from now on block until Release().
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // ReadFast calls that have returned.
  int returned() const {
    std::lock_guard lock(mu_);
    return returned_;
  }
  bool backend_destroyed() const {
    std::lock_guard lock(mu_);
    return destroyed_;
  }

  // The backend's side. Blocks while held, for at most kHangBound.
  void Pass() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kHangBound, [this] { return !held_; });
  }
  void NoteReturned() {
    std::lock_guard lock(mu_);
    ++returned_;
  }
  void NoteDestroyed() {
    std::lock_guard lock(mu_);
    destroyed_ = true;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int returned_ = 0;
  bool destroyed_ = false;
};

// Two GPUs with one process, answered from memory; ReadFast passes `hold` first.
class HeldBackend final : public Backend {
 public:
  explicit HeldBackend(std::shared_ptr<CallHold> hold) : hold_(std::move(hold)) {}
  ~HeldBackend() override { hold_->NoteDestroyed(); }

  std::string_view Name() const override { return "held"; }
  Result<Inventory> ReadInventory() override {
    Inventory inventory;
    inventory.backend = "held";
    inventory.driver_version = "580.159.04";
    for (uint32_t i = 0; i < 2; ++i) {
      GpuInfo& gpu = inventory.gpus.emplace_back();
      gpu.index = i;
      gpu.minor = i;
      gpu.uuid = Uuid(i);
    }
    return inventory;
  }
  Result<std::vector<GpuReading>> ReadFast() override {
    hold_->Pass();
    std::vector<GpuReading> readings(2);
    for (uint32_t i = 0; i < 2; ++i) {
      readings[i].uuid = Uuid(i);
      readings[i].sm_util = 100.0;
    }
    hold_->NoteReturned();
    return readings;
  }
  Result<std::vector<GpuProcess>> ReadProcesses() override {
    std::vector<GpuProcess> processes(1);
    processes[0].pid = 521;
    processes[0].gpu_uuid = Uuid(0);
    return processes;
  }
  Result<std::vector<SlowReading>> ReadEnergy() override {
    std::vector<SlowReading> readings(2);
    for (uint32_t i = 0; i < 2; ++i) {
      readings[i].uuid = Uuid(i);
      readings[i].energy_mj = 1000 * (i + 1);
    }
    return readings;
  }
  Result<std::vector<ProcessUtilization>> ReadProcessUtilization(uint64_t) override {
    return std::vector<ProcessUtilization>{};
  }

 private:
  static std::string Uuid(uint32_t i) { return "GPU-0000000" + std::to_string(i); }

  std::shared_ptr<CallHold> hold_;
};

}  // namespace expanse::gpu::testing

#endif  // EXPANSE_GPU_HELD_BACKEND_TEST_UTIL_H_
