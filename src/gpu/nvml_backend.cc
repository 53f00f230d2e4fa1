#include "gpu/nvml_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace expanse::gpu {
namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;

std::string FromBuffer(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

}  // namespace

Result<std::unique_ptr<NvmlBackend>> NvmlBackend::Create(const std::string& library_path) {
  EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<NvmlLibrary> library, NvmlLibrary::Open(library_path));
  std::unique_ptr<NvmlBackend> backend(new NvmlBackend(std::move(library)));
  const nvmlReturn_t init = backend->library_->fn().Init();
  if (init != kNvmlSuccess) {
    return UnavailableError("nvmlInit failed: " + backend->library_->Describe(init) +
                            (init == kNvmlErrorDriverNotLoaded
                                 ? " (the NVIDIA kernel module is not loaded)"
                                 : ""))
        .WithReason("nvml_init_failed");
  }
  backend->initialised_ = true;
  std::lock_guard lock(backend->mu_);
  EXPANSE_RETURN_IF_ERROR(backend->EnumerateLocked().status());
  return backend;
}

NvmlBackend::~NvmlBackend() {
  if (initialised_)
    library_->fn().Shutdown();
}

Status NvmlBackend::CallError(const char* call, nvmlReturn_t code) const {
  return UnavailableError(std::string(call) + " failed: " + library_->Describe(code))
      .WithReason(code == kNvmlErrorGpuIsLost ? "gpu_lost" : "nvml_call_failed");
}

bool NvmlBackend::Check(Device& device, Field field, nvmlReturn_t code) const {
  if (code == kNvmlSuccess)
    return true;
  if (code == kNvmlErrorNotSupported)
    device.unsupported.fetch_or(field);
  return false;
}

std::vector<std::shared_ptr<NvmlBackend::Device>> NvmlBackend::Devices() {
  std::lock_guard lock(mu_);
  return devices_;
}

Result<Inventory> NvmlBackend::EnumerateLocked() {
  const NvmlFunctions& f = library_->fn();
  Inventory inventory;
  inventory.backend = "nvml";
  char text[kNvmlDriverVersionBufferSize] = {};
  if (f.SystemGetDriverVersion(text, sizeof text) == kNvmlSuccess) {
    inventory.driver_version = FromBuffer(text, sizeof text);
  }
  char version[kNvmlVersionBufferSize] = {};
  if (f.SystemGetNVMLVersion != nullptr &&
      f.SystemGetNVMLVersion(version, sizeof version) == kNvmlSuccess) {
    inventory.library_version = FromBuffer(version, sizeof version);
  }

  unsigned count = 0;
  if (nvmlReturn_t rc = f.DeviceGetCount(&count); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceGetCount", rc);
  }
  std::vector<std::shared_ptr<Device>> devices;
  for (unsigned i = 0; i < count; ++i) {
    auto device = std::make_shared<Device>();
    if (nvmlReturn_t rc = f.DeviceGetHandleByIndex(i, &device->handle); rc != kNvmlSuccess) {
      // One broken GPU (e.g. fallen off the bus) must not hide the others.
      continue;
    }
    GpuInfo info;
    info.index = i;
    char uuid[kNvmlUuidBufferSize] = {};
    if (nvmlReturn_t rc = f.DeviceGetUUID(device->handle, uuid, sizeof uuid); rc != kNvmlSuccess) {
      continue;  // without a UUID its readings could not be named
    }
    info.uuid = FromBuffer(uuid, sizeof uuid);
    char name[kNvmlNameBufferSize] = {};
    if (f.DeviceGetName(device->handle, name, sizeof name) == kNvmlSuccess) {
      info.name = FromBuffer(name, sizeof name);
    }
    unsigned minor = 0;
    if (f.DeviceGetMinorNumber != nullptr &&
        f.DeviceGetMinorNumber(device->handle, &minor) == kNvmlSuccess) {
      info.minor = minor;
    }
    nvmlPciInfo_t pci{};
    if (f.DeviceGetPciInfo != nullptr && f.DeviceGetPciInfo(device->handle, &pci) == kNvmlSuccess) {
      info.pci_bus_id = FromBuffer(pci.busId, sizeof pci.busId);
    }
    nvmlMemory_t memory{};
    if (f.DeviceGetMemoryInfo(device->handle, &memory) == kNvmlSuccess) {
      info.memory_total_mib = memory.total / (1024 * 1024);
    }
    device->uuid = info.uuid;
    inventory.gpus.push_back(std::move(info));
    devices.push_back(std::move(device));
  }
  devices_ = std::move(devices);
  return inventory;
}

Result<Inventory> NvmlBackend::ReadInventory() {
  std::lock_guard lock(mu_);
  return EnumerateLocked();
}

Result<std::vector<GpuReading>> NvmlBackend::ReadFast() {
  const NvmlFunctions& f = library_->fn();
  std::vector<std::shared_ptr<Device>> devices = Devices();
  std::vector<GpuReading> readings;
  readings.reserve(devices.size());
  size_t failed = 0;
  nvmlReturn_t last_error = kNvmlSuccess;
  for (const auto& device_ptr : devices) {
    Device& d = *device_ptr;
    const unsigned skip = d.unsupported.load(std::memory_order_relaxed);
    GpuReading r;
    r.uuid = d.uuid;
    nvmlUtilization_t util{};
    if (nvmlReturn_t rc = f.DeviceGetUtilizationRates(d.handle, &util); rc == kNvmlSuccess) {
      r.sm_util = util.gpu;
      r.mem_util = util.memory;
    } else {
      // Utilisation is the one reading every supported GPU has; its failure means the GPU
      // (or the driver) is in trouble, which the caller should hear about.
      ++failed;
      last_error = rc;
    }
    nvmlMemory_t memory{};
    if (f.DeviceGetMemoryInfo(d.handle, &memory) == kNvmlSuccess) {
      r.mem_used_mib = static_cast<double>(memory.used) / kBytesPerMib;
    }
    unsigned value = 0;
    if (f.DeviceGetPowerUsage != nullptr && !(skip & kPower) &&
        Check(d, kPower, f.DeviceGetPowerUsage(d.handle, &value))) {
      r.power_w = value / 1000.0;
    }
    if (f.DeviceGetTemperature != nullptr && !(skip & kTemperature) &&
        Check(d, kTemperature, f.DeviceGetTemperature(d.handle, kNvmlTemperatureGpu, &value))) {
      r.temp_c = value;
    }
    if (f.DeviceGetClockInfo != nullptr) {
      if (!(skip & kSmClock) &&
          Check(d, kSmClock, f.DeviceGetClockInfo(d.handle, kNvmlClockSm, &value))) {
        r.sm_clock_mhz = value;
      }
      if (!(skip & kMemClock) &&
          Check(d, kMemClock, f.DeviceGetClockInfo(d.handle, kNvmlClockMem, &value))) {
        r.mem_clock_mhz = value;
      }
    }
    unsigned long long wide = 0;
    if (f.DeviceGetClockEventReasons != nullptr && !(skip & kClockReasons) &&
        Check(d, kClockReasons, f.DeviceGetClockEventReasons(d.handle, &wide))) {
      r.clock_event_reasons = wide;
    }
    if (f.DeviceGetTotalEccErrors != nullptr) {
      if (!(skip & kEccCorrected) &&
          Check(d, kEccCorrected,
                f.DeviceGetTotalEccErrors(d.handle, kNvmlMemoryErrorCorrected, kNvmlVolatileEcc,
                                          &wide))) {
        r.ecc_corrected = wide;
      }
      if (!(skip & kEccUncorrected) &&
          Check(d, kEccUncorrected,
                f.DeviceGetTotalEccErrors(d.handle, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc,
                                          &wide))) {
        r.ecc_uncorrected = wide;
      }
    }
    readings.push_back(std::move(r));
  }
  if (!devices.empty() && failed == devices.size()) {
    return CallError("nvmlDeviceGetUtilizationRates", last_error);
  }
  return readings;
}

Result<std::vector<GpuProcess>> NvmlBackend::ReadProcesses() {
  const NvmlFunctions& f = library_->fn();
  std::vector<GpuProcess> processes;
  if (f.DeviceGetComputeRunningProcesses == nullptr) {
    return FailedPreconditionError(
               "libnvidia-ml lacks nvmlDeviceGetComputeRunningProcesses_v3/_v2; GPU processes "
               "cannot be listed")
        .WithReason("nvml_symbol_missing");
  }
  std::vector<nvmlProcessInfo_t> buffer(16);
  // One NVML list of a device into `processes`, each pid once per device; NVML's answer.
  using ListFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  auto read_list = [&](const auto& device, ListFn list, size_t device_first) {
    unsigned count = 0;
    nvmlReturn_t rc = kNvmlErrorInsufficientSize;
    // The list can grow between the sizing call and the read; a few rounds settle it.
    for (int attempt = 0; attempt < 4 && rc == kNvmlErrorInsufficientSize; ++attempt) {
      count = static_cast<unsigned>(buffer.size());
      rc = list(device->handle, &count, buffer.data());
      if (rc == kNvmlErrorInsufficientSize)
        buffer.resize(std::max<size_t>(count, buffer.size()) * 2);
    }
    if (rc != kNvmlSuccess)
      return rc;
    for (unsigned i = 0; i < count && i < buffer.size(); ++i) {
      const bool seen =
          std::any_of(processes.begin() + static_cast<ptrdiff_t>(device_first), processes.end(),
                      [&](const GpuProcess& p) { return p.pid == buffer[i].pid; });
      if (seen)
        continue;
      GpuProcess p;
      p.pid = buffer[i].pid;
      p.gpu_uuid = device->uuid;
      if (buffer[i].usedGpuMemory != kNvmlValueNotAvailable) {
        p.used_memory_mib = buffer[i].usedGpuMemory / (1024 * 1024);
      }
      processes.push_back(std::move(p));
    }
    return rc;
  };
  // A GPU whose list cannot be read makes the whole listing unknown: read as a shorter list,
  // it would say that no job runs on that GPU. A GPU that is lost runs nothing: it has none.
  for (const auto& device : Devices()) {
    const size_t first = processes.size();
    if (nvmlReturn_t rc = read_list(device, f.DeviceGetComputeRunningProcesses, first);
        rc == kNvmlErrorGpuIsLost) {
      continue;
    } else if (rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetComputeRunningProcesses", rc);
    }
    // Under MPS the jobs' processes are clients of the MPS server, listed apart; without MPS
    // the list is empty, or the call unsupported (older GPUs), and the GPU's list stands.
    if (f.DeviceGetMPSComputeRunningProcesses != nullptr) {
      if (nvmlReturn_t rc = read_list(device, f.DeviceGetMPSComputeRunningProcesses, first);
          rc != kNvmlSuccess && rc != kNvmlErrorNotSupported) {
        return CallError("nvmlDeviceGetMPSComputeRunningProcesses", rc);
      }
    }
  }
  return processes;
}

Result<std::vector<SlowReading>> NvmlBackend::ReadEnergy() {
  const NvmlFunctions& f = library_->fn();
  std::vector<SlowReading> readings;
  for (const auto& device : Devices()) {
    SlowReading r;
    r.uuid = device->uuid;
    unsigned long long mj = 0;
    if (f.DeviceGetTotalEnergyConsumption != nullptr && !(device->unsupported.load() & kEnergy) &&
        Check(*device, kEnergy, f.DeviceGetTotalEnergyConsumption(device->handle, &mj))) {
      r.energy_mj = mj;
    }
    readings.push_back(std::move(r));
  }
  return readings;
}

Result<std::vector<ProcessUtilization>> NvmlBackend::ReadProcessUtilization(uint64_t since_us) {
  const NvmlFunctions& f = library_->fn();
  std::vector<ProcessUtilization> result;
  if (f.DeviceGetProcessUtilization == nullptr)
    return result;
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (const auto& device : Devices()) {
    if (device->unsupported.load() & kProcessUtil)
      continue;
    unsigned count = 0;
    // The sizing call: NOT_FOUND means no process ran on the GPU in the driver's window.
    nvmlReturn_t rc = f.DeviceGetProcessUtilization(device->handle, nullptr, &count, since_us);
    if (rc == kNvmlErrorNotFound || (rc == kNvmlSuccess && count == 0))
      continue;
    if (rc != kNvmlErrorInsufficientSize && rc != kNvmlSuccess) {
      Check(*device, kProcessUtil, rc);
      continue;
    }
    samples.assign(count + 8, nvmlProcessUtilizationSample_t{});
    count = static_cast<unsigned>(samples.size());
    rc = f.DeviceGetProcessUtilization(device->handle, samples.data(), &count, since_us);
    if (rc != kNvmlSuccess)
      continue;
    for (unsigned i = 0; i < count && i < samples.size(); ++i) {
      ProcessUtilization u;
      u.pid = samples[i].pid;
      u.gpu_uuid = device->uuid;
      u.sm_util = samples[i].smUtil;
      u.mem_util = samples[i].memUtil;
      u.timestamp_us = samples[i].timeStamp;
      result.push_back(std::move(u));
    }
  }
  return result;
}

}  // namespace expanse::gpu
