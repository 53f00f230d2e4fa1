// NvmlLibrary: libnvidia-ml.so.1 opened with dlopen and its entry points resolved.
//
// Required symbols are the ones without which there is nothing useful to sample (init,
// enumeration, identity, utilisation, memory); a library missing one is refused with the
// symbol's name. Optional symbols (power, clocks, ECC, processes, energy, ...) may be absent in
// older drivers; their pointers are then null and the backend leaves those readings empty.
#ifndef EXPANSE_GPU_NVML_LIBRARY_H_
#define EXPANSE_GPU_NVML_LIBRARY_H_

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "gpu/nvml_abi.h"

namespace expanse::gpu {

// The library name the loader searches for; the driver installs it.
inline constexpr char kNvmlLibraryName[] = "libnvidia-ml.so.1";

struct NvmlFunctions {
  // Required.
  nvmlReturn_t (*Init)();  // nvmlInit_v2
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned);
  nvmlReturn_t (*DeviceGetCount)(unsigned*);                        // _v2
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned, nvmlDevice_t*);  // _v2
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);

  // Optional: null when the library lacks them.
  nvmlReturn_t (*SystemGetNVMLVersion)(char*, unsigned);
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);  // _v3
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned*);    // milliwatts
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned*);
  // nvmlDeviceGetCurrentClocksEventReasons (R535+), else the older ...ThrottleReasons.
  nvmlReturn_t (*DeviceGetClockEventReasons)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  // nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (same struct).
  nvmlReturn_t (*DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  // nvmlDeviceGetMPSComputeRunningProcesses_v3, else _v2 (same struct): under MPS the clients,
  // which the call above does not list (it lists the MPS server).
  nvmlReturn_t (*DeviceGetMPSComputeRunningProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  nvmlReturn_t (*DeviceGetProcessUtilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                              unsigned*, unsigned long long);
  nvmlReturn_t (*DeviceGetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*);
};

class NvmlLibrary {
 public:
  // Opens `path` ("" = kNvmlLibraryName through the loader's search path). Fails with reason
  // "nvml_not_found" when the library is absent and "nvml_symbol_missing" when a required
  // entry point is.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  // The file the loader actually mapped (from dlinfo), for diagnostics.
  const std::string& loaded_path() const { return loaded_path_; }
  // Optional entry points this library lacks, for diagnostics.
  const std::vector<std::string>& missing_optional() const { return missing_optional_; }

  // "NVML_ERROR_NOT_SUPPORTED (3): Not Supported"-style text for a return code.
  std::string Describe(nvmlReturn_t code) const;

 private:
  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  void* handle_;
  NvmlFunctions fn_{};
  std::string loaded_path_;
  std::vector<std::string> missing_optional_;
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVML_LIBRARY_H_
