#include "cupti/cuda/devices.h"

#include <cstdio>

namespace expanse::cupti {

std::string FormatGpuUuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      text += '-';
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

CudaInventory ListDevices(const CudaLibrary& cuda, CallWatchdog& watchdog) {
  CudaInventory inventory;
  const auto& fn = cuda.fn();
  auto failed = [&](const char* call, CUresult result) {
    inventory.error = cuda.Name(result);
    inventory.error_call = call;
    return inventory;
  };
  CUresult result;
  {
    CallWatchdog::Scope scope(watchdog, "cuInit");
    result = fn.Init(0);
  }
  if (result != CUDA_SUCCESS)
    return failed("cuInit", result);
  {
    CallWatchdog::Scope scope(watchdog, "cuDriverGetVersion");
    result = fn.DriverGetVersion(&inventory.driver_api_version);
  }
  if (result != CUDA_SUCCESS)
    return failed("cuDriverGetVersion", result);
  int count = 0;
  {
    CallWatchdog::Scope scope(watchdog, "cuDeviceGetCount");
    result = fn.DeviceGetCount(&count);
  }
  if (result != CUDA_SUCCESS)
    return failed("cuDeviceGetCount", result);
  for (int index = 0; index < count && index < 64; ++index) {
    CallWatchdog::Scope scope(watchdog, "cuDeviceGet");
    CUdevice device = 0;
    if ((result = fn.DeviceGet(&device, index)) != CUDA_SUCCESS)
      return failed("cuDeviceGet", result);
    CudaDevice entry;
    entry.index = index;
    char name[256] = {};
    if ((result = fn.DeviceGetName(name, sizeof(name) - 1, device)) != CUDA_SUCCESS)
      return failed("cuDeviceGetName", result);
    entry.name = name;
    CUuuid uuid{};
    if ((result = fn.DeviceGetUuid(&uuid, device)) != CUDA_SUCCESS)
      return failed("cuDeviceGetUuid", result);
    entry.uuid = FormatGpuUuid(uuid);
    if ((result = fn.DeviceGetAttribute(&entry.cc_major,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)) !=
            CUDA_SUCCESS ||
        (result = fn.DeviceGetAttribute(&entry.cc_minor,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)) !=
            CUDA_SUCCESS)
      return failed("cuDeviceGetAttribute", result);
    inventory.devices.push_back(std::move(entry));
  }
  return inventory;
}

}  // namespace expanse::cupti
