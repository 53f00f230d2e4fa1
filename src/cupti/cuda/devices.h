// The GPUs the CUDA driver API sees, with the identity NVML uses for the same GPU (its UUID),
// so the sampler's series and the helper's counters join on one name.
#ifndef EXPANSE_CUPTI_CUDA_DEVICES_H_
#define EXPANSE_CUPTI_CUDA_DEVICES_H_

#include <string>
#include <vector>

#include "cupti/call_watchdog.h"
#include "cupti/cuda/libraries.h"

namespace expanse::cupti {

struct CudaDevice {
  int index = 0;
  std::string uuid;  // "GPU-3f0f2b8c-…"
  std::string name;
  int cc_major = 0, cc_minor = 0;
};

struct CudaInventory {
  int driver_api_version = 0;  // cuDriverGetVersion: 13000 = CUDA 13.0
  std::vector<CudaDevice> devices;
  std::string error;       // "CUDA_ERROR_NO_DEVICE"; "" when the driver answered
  std::string error_call;  // "cuInit"
};

// cuInit, the driver's CUDA version, then each device's identity.
CudaInventory ListDevices(const CudaLibrary& cuda, CallWatchdog& watchdog);

// "GPU-" and the 16 bytes as 8-4-4-4-12 hex digits, as nvidia-smi prints them.
std::string FormatGpuUuid(const CUuuid& uuid);

// "13.0" for 13000.
std::string CudaVersionText(int version);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_DEVICES_H_
