// NvmlBackend: reads GPUs through NVML (libnvidia-ml.so.1, opened at run time).
//
// Per-second calls cost microseconds on an H200 (utilisation 0.9 us, memory 5 us, processes
// 9-26 us); energy (~4 ms) and per-process utilisation (~2 ms) are served by the separate
// ReadEnergy / ReadProcessUtilization calls, which the sampler makes on a slower cadence and on
// another thread. A value a GPU reports as NOT_SUPPORTED once is not asked for again.
//
// Thread safety: NVML itself is thread-safe. ReadFast/ReadProcesses/ReadInventory (the fast
// lane) and ReadEnergy/ReadProcessUtilization (the slow lane) may run concurrently; the
// device list they share is guarded by a mutex.
#ifndef EXPANSE_GPU_NVML_BACKEND_H_
#define EXPANSE_GPU_NVML_BACKEND_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/nvml_library.h"

namespace expanse::gpu {

class NvmlBackend final : public Backend {
 public:
  // Loads the library (`library_path` "" = the loader's libnvidia-ml.so.1), calls nvmlInit and
  // enumerates the GPUs once.
  static Result<std::unique_ptr<NvmlBackend>> Create(const std::string& library_path);
  ~NvmlBackend() override;

  std::string_view Name() const override { return "nvml"; }
  Result<Inventory> ReadInventory() override;
  Result<std::vector<GpuReading>> ReadFast() override;
  Result<std::vector<GpuProcess>> ReadProcesses() override;
  Result<std::vector<SlowReading>> ReadEnergy() override;
  Result<std::vector<ProcessUtilization>> ReadProcessUtilization(uint64_t since_us) override;

  const NvmlLibrary& library() const { return *library_; }

 private:
  // Fields that stop being asked for once a GPU answers NOT_SUPPORTED.
  enum Field : unsigned {
    kPower = 1u << 0,
    kTemperature = 1u << 1,
    kSmClock = 1u << 2,
    kMemClock = 1u << 3,
    kClockReasons = 1u << 4,
    kEccCorrected = 1u << 5,
    kEccUncorrected = 1u << 6,
    kEnergy = 1u << 7,
    kProcessUtil = 1u << 8,
  };
  struct Device {
    nvmlDevice_t handle = nullptr;
    std::string uuid;
    std::atomic<unsigned> unsupported{0};
  };

  explicit NvmlBackend(std::unique_ptr<NvmlLibrary> library) : library_(std::move(library)) {}
  // Rebuilds devices_ from NVML; the caller holds mu_.
  Result<Inventory> EnumerateLocked();
  std::vector<std::shared_ptr<Device>> Devices();
  Status CallError(const char* call, nvmlReturn_t code) const;
  // True if the call succeeded; on NOT_SUPPORTED marks `field` for `device`.
  bool Check(Device& device, Field field, nvmlReturn_t code) const;

  std::unique_ptr<NvmlLibrary> library_;
  bool initialised_ = false;
  std::mutex mu_;
  std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVML_BACKEND_H_
