// GuardedBackend: calls a Backend with a deadline, so a hung driver cannot stall the sampler.
//
// A call into NVML (or a wait on nvidia-smi) can block indefinitely when the driver or a GPU is
// in trouble, and a thread blocked inside the driver cannot be cancelled. So each call runs on
// a lane's worker thread while the caller waits at most `timeout`. On timeout the caller gets
// DEADLINE_EXCEEDED (reason "gpu_call_hung"), and until the stuck call returns every later call
// on that lane fails at once with UNAVAILABLE ("gpu_call_blocked") naming the stuck call; the
// loop goes on (heartbeats, spool, jobs) and health says why GPU readings are missing.
//
// Two lanes: the fast lane (inventory, per-second readings, processes) and the slow lane
// (energy, per-process utilisation), so the slow calls never delay the per-second ones.
// If the guard is destroyed while a call is stuck, that lane's thread is detached; it holds
// its own reference to the backend, which is therefore freed only if the call ever returns.
#ifndef EXPANSE_GPU_GUARDED_BACKEND_H_
#define EXPANSE_GPU_GUARDED_BACKEND_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpu/backend.h"

namespace expanse::gpu {

class GuardedBackend {
 public:
  GuardedBackend(std::unique_ptr<Backend> backend, std::chrono::milliseconds timeout);
  ~GuardedBackend();
  GuardedBackend(const GuardedBackend&) = delete;
  GuardedBackend& operator=(const GuardedBackend&) = delete;

  const std::string& name() const { return name_; }

  Result<Inventory> ReadInventory();
  Result<std::vector<GpuReading>> ReadFast();
  Result<std::vector<GpuProcess>> ReadProcesses();
  Result<std::vector<SlowReading>> ReadEnergy();
  Result<std::vector<ProcessUtilization>> ReadProcessUtilization(uint64_t since_us);

  // "ReadFast blocked for 12 s" while a call is stuck on either lane (it has run past the
  // deadline it started with and not returned); empty otherwise.
  std::optional<std::string> StuckCall() const;

  // The deadline of calls that start from now on; a call already running keeps its own. Lets a
  // test make the one call it holds blocked time out at once while the others keep a generous
  // deadline, instead of sleeping through a real one.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  struct Lane;  // defined in the .cc

 private:
  template <typename T>
  Result<T> Call(Lane& lane, const char* what, std::function<Result<T>(Backend&)> fn);

  std::string name_;
  std::shared_ptr<Backend> backend_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::shared_ptr<Lane> fast_;
  std::shared_ptr<Lane> slow_;
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_GUARDED_BACKEND_H_
