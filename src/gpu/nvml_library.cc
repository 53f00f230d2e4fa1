#include "gpu/nvml_library.h"

#include <dlfcn.h>
#include <link.h>

#include <string_view>
#include <utility>

namespace expanse::gpu {
namespace {

// Resolves the first of `names` the library exports into `*slot`. Returns false if none is.
template <typename Fn>
bool Resolve(void* handle, std::initializer_list<const char*> names, Fn* slot) {
  for (const char* name : names) {
    if (void* symbol = dlsym(handle, name)) {
      *slot = reinterpret_cast<Fn>(symbol);
      return true;
    }
  }
  *slot = nullptr;
  return false;
}

std::string_view CodeName(nvmlReturn_t code) {
  switch (code) {
    case kNvmlSuccess:
      return "NVML_SUCCESS";
    case kNvmlErrorUninitialized:
      return "NVML_ERROR_UNINITIALIZED";
    case kNvmlErrorInvalidArgument:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case kNvmlErrorNotSupported:
      return "NVML_ERROR_NOT_SUPPORTED";
    case kNvmlErrorNoPermission:
      return "NVML_ERROR_NO_PERMISSION";
    case kNvmlErrorNotFound:
      return "NVML_ERROR_NOT_FOUND";
    case kNvmlErrorInsufficientSize:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case kNvmlErrorDriverNotLoaded:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case kNvmlErrorTimeout:
      return "NVML_ERROR_TIMEOUT";
    case kNvmlErrorGpuIsLost:
      return "NVML_ERROR_GPU_IS_LOST";
    case kNvmlErrorNoData:
      return "NVML_ERROR_NO_DATA";
    default:
      return "NVML_ERROR";
  }
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  const std::string name = path.empty() ? std::string(kNvmlLibraryName) : path;
  dlerror();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError("cannot load " + name + ": " + (why ? why : "unknown dlopen error") +
                            " (is the NVIDIA driver installed on this node?)")
        .WithReason("nvml_not_found");
  }
  std::unique_ptr<NvmlLibrary> library(new NvmlLibrary(handle));
  NvmlFunctions& f = library->fn_;

  std::string missing;
  auto required = [&](std::initializer_list<const char*> names, auto* slot) {
    if (!Resolve(handle, names, slot)) {
      missing += missing.empty() ? "" : ", ";
      missing += *names.begin();
    }
  };
  required({"nvmlInit_v2"}, &f.Init);
  required({"nvmlShutdown"}, &f.Shutdown);
  required({"nvmlErrorString"}, &f.ErrorString);
  required({"nvmlSystemGetDriverVersion"}, &f.SystemGetDriverVersion);
  required({"nvmlDeviceGetCount_v2"}, &f.DeviceGetCount);
  required({"nvmlDeviceGetHandleByIndex_v2"}, &f.DeviceGetHandleByIndex);
  required({"nvmlDeviceGetUUID"}, &f.DeviceGetUUID);
  required({"nvmlDeviceGetName"}, &f.DeviceGetName);
  required({"nvmlDeviceGetMemoryInfo"}, &f.DeviceGetMemoryInfo);
  required({"nvmlDeviceGetUtilizationRates"}, &f.DeviceGetUtilizationRates);
  if (!missing.empty()) {
    return FailedPreconditionError(name + " lacks required NVML entry points: " + missing +
                                   " (driver older than R450?)")
        .WithReason("nvml_symbol_missing");
  }

  auto optional = [&](std::initializer_list<const char*> names, auto* slot) {
    if (!Resolve(handle, names, slot))
      library->missing_optional_.emplace_back(*names.begin());
  };
  optional({"nvmlSystemGetNVMLVersion"}, &f.SystemGetNVMLVersion);
  optional({"nvmlDeviceGetMinorNumber"}, &f.DeviceGetMinorNumber);
  optional({"nvmlDeviceGetPciInfo_v3"}, &f.DeviceGetPciInfo);
  optional({"nvmlDeviceGetPowerUsage"}, &f.DeviceGetPowerUsage);
  optional({"nvmlDeviceGetTemperature"}, &f.DeviceGetTemperature);
  optional({"nvmlDeviceGetClockInfo"}, &f.DeviceGetClockInfo);
  optional({"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
           &f.DeviceGetClockEventReasons);
  optional({"nvmlDeviceGetTotalEccErrors"}, &f.DeviceGetTotalEccErrors);
  optional({"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
           &f.DeviceGetComputeRunningProcesses);
  optional(
      {"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2"},
      &f.DeviceGetMPSComputeRunningProcesses);
  optional({"nvmlDeviceGetProcessUtilization"}, &f.DeviceGetProcessUtilization);
  optional({"nvmlDeviceGetTotalEnergyConsumption"}, &f.DeviceGetTotalEnergyConsumption);

  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    library->loaded_path_ = map->l_name;
  }
  if (library->loaded_path_.empty())
    library->loaded_path_ = name;
  return library;
}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr)
    dlclose(handle_);
}

std::string NvmlLibrary::Describe(nvmlReturn_t code) const {
  std::string text(CodeName(code));
  text += " (" + std::to_string(code) + ")";
  if (fn_.ErrorString != nullptr) {
    if (const char* message = fn_.ErrorString(code)) {
      text += ": ";
      text += message;
    }
  }
  return text;
}

}  // namespace expanse::gpu
