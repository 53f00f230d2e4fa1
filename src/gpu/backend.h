// The GPU backend interface. A backend reads one node's NVIDIA GPUs: NVML loaded at run
// time (nvml_backend.h) or the nvidia-smi command as a fallback (nvidia_smi_backend.h).
// The sampler (sampler.h) calls a backend through a GuardedBackend (guarded_backend.h), so a
// driver call that hangs stalls neither the sampling loop nor the hooks.
//
// Readings are optional field by field: a GPU or driver that does not support a value
// (NVML_ERROR_NOT_SUPPORTED, nvidia-smi's "[N/A]") leaves it empty, and it is then absent
// from the uploaded series rather than reported as zero.

#ifndef EXPANSE_GPU_BACKEND_H_
#define EXPANSE_GPU_BACKEND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::gpu {

// One GPU as the driver enumerates it. `index` is NVML's (and nvidia-smi's) index, which
// follows PCI bus order; `minor` is the N of /dev/nvidiaN, which SLURM's GRES and the
// cgroup device controller use. The two often differ, so attribution always goes through
// the minor number or the UUID, never the index alone.
struct GpuInfo {
  uint32_t index = 0;
  std::optional<uint32_t> minor;
  std::string uuid;        // "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0"
  std::string pci_bus_id;  // "00000000:00:06.0"
  std::string name;        // "NVIDIA H200"
  std::optional<uint64_t> memory_total_mib;
};

struct Inventory {
  std::string backend;          // "nvml" or "nvidia-smi"
  std::string driver_version;   // "580.159.04"
  std::string library_version;  // NVML's own version ("13.580.159.04"); empty for nvidia-smi
  std::vector<GpuInfo> gpus;
};

// The per-second readings of one GPU.
struct GpuReading {
  std::string uuid;
  std::optional<double> sm_util;   // percent: time a kernel was running
  std::optional<double> mem_util;  // percent: memory-controller busy time
  std::optional<double> mem_used_mib;
  std::optional<double> power_w;
  std::optional<double> temp_c;
  std::optional<double> sm_clock_mhz;
  std::optional<double> mem_clock_mhz;
  std::optional<uint64_t> clock_event_reasons;  // NVML clock-event (throttle) bitmask
  std::optional<uint64_t> ecc_corrected;        // volatile totals since the driver loaded
  std::optional<uint64_t> ecc_uncorrected;
};

// A process holding a GPU context.
struct GpuProcess {
  uint32_t pid = 0;
  std::string gpu_uuid;
  std::optional<uint64_t> used_memory_mib;  // empty when the driver hides it
};

// Readings too slow for the per-second path (milliseconds per GPU on an H200).
struct SlowReading {
  std::string uuid;
  std::optional<uint64_t> energy_mj;  // total energy since the driver loaded
};
struct ProcessUtilization {
  uint32_t pid = 0;
  std::string gpu_uuid;
  uint32_t sm_util = 0;  // percent over the driver's sampling window
  uint32_t mem_util = 0;
  uint64_t timestamp_us = 0;  // the driver's sample time; the next call passes the newest
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "nvml" or "nvidia-smi"; also the name shown in health and diagnostics.
  virtual std::string_view Name() const = 0;

  // The GPUs present. Called at start and whenever the sampler sees a change.
  virtual Result<Inventory> ReadInventory() = 0;

  // Per-second readings of every GPU, in inventory order.
  virtual Result<std::vector<GpuReading>> ReadFast() = 0;

  // Processes holding a GPU context, with their memory.
  virtual Result<std::vector<GpuProcess>> ReadProcesses() = 0;

  // Slow readings: energy and per-process utilisation. `since_us` is the driver timestamp
  // (microseconds) of the previous call, so only newer per-process samples are returned;
  // 0 asks for everything the driver still holds.
  virtual Result<std::vector<SlowReading>> ReadEnergy() = 0;
  virtual Result<std::vector<ProcessUtilization>> ReadProcessUtilization(uint64_t since_us) = 0;
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_BACKEND_H_
