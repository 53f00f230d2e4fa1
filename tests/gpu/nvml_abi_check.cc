// Compares src/gpu/nvml_abi.h with NVIDIA's nvml.h: every struct's size and field offsets and
// every constant the backend passes or tests. Built and run by scripts/gpu-check on a machine
// with the CUDA toolkit (nvml.h ships with it); a mismatch fails the compile.
//
//   g++ -std=c++20 -I src -I /usr/local/cuda/include tests/gpu/nvml_abi_check.cc
#include <nvml.h>

#include <cstddef>
#include <cstdio>

namespace ours {
#include "gpu/nvml_abi.h"
}  // namespace ours

#define SAME_LAYOUT(type, field) \
  static_assert(offsetof(::type, field) == offsetof(ours::type, field), #type "." #field)
#define SAME_SIZE(type) static_assert(sizeof(::type) == sizeof(ours::type), "sizeof " #type)

SAME_SIZE(nvmlMemory_t);
SAME_LAYOUT(nvmlMemory_t, total);
SAME_LAYOUT(nvmlMemory_t, free);
SAME_LAYOUT(nvmlMemory_t, used);
SAME_SIZE(nvmlUtilization_t);
SAME_LAYOUT(nvmlUtilization_t, gpu);
SAME_LAYOUT(nvmlUtilization_t, memory);
SAME_SIZE(nvmlPciInfo_t);
SAME_LAYOUT(nvmlPciInfo_t, busIdLegacy);
SAME_LAYOUT(nvmlPciInfo_t, domain);
SAME_LAYOUT(nvmlPciInfo_t, pciDeviceId);
SAME_LAYOUT(nvmlPciInfo_t, busId);
// _v3 of nvmlDeviceGetComputeRunningProcesses takes nvmlProcessInfo_t in current headers.
SAME_SIZE(nvmlProcessInfo_t);
SAME_LAYOUT(nvmlProcessInfo_t, pid);
SAME_LAYOUT(nvmlProcessInfo_t, usedGpuMemory);
SAME_LAYOUT(nvmlProcessInfo_t, gpuInstanceId);
SAME_LAYOUT(nvmlProcessInfo_t, computeInstanceId);
SAME_SIZE(nvmlProcessUtilizationSample_t);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, pid);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, timeStamp);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, smUtil);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, memUtil);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, encUtil);
SAME_LAYOUT(nvmlProcessUtilizationSample_t, decUtil);
static_assert(sizeof(nvmlReturn_t) == sizeof(ours::nvmlReturn_t));

static_assert(ours::kNvmlSuccess == NVML_SUCCESS);
static_assert(ours::kNvmlErrorUninitialized == NVML_ERROR_UNINITIALIZED);
static_assert(ours::kNvmlErrorInvalidArgument == NVML_ERROR_INVALID_ARGUMENT);
static_assert(ours::kNvmlErrorNotSupported == NVML_ERROR_NOT_SUPPORTED);
static_assert(ours::kNvmlErrorNoPermission == NVML_ERROR_NO_PERMISSION);
static_assert(ours::kNvmlErrorNotFound == NVML_ERROR_NOT_FOUND);
static_assert(ours::kNvmlErrorInsufficientSize == NVML_ERROR_INSUFFICIENT_SIZE);
static_assert(ours::kNvmlErrorDriverNotLoaded == NVML_ERROR_DRIVER_NOT_LOADED);
static_assert(ours::kNvmlErrorTimeout == NVML_ERROR_TIMEOUT);
static_assert(ours::kNvmlErrorGpuIsLost == NVML_ERROR_GPU_IS_LOST);
static_assert(ours::kNvmlErrorNoData == NVML_ERROR_NO_DATA);
static_assert(ours::kNvmlErrorUnknown == NVML_ERROR_UNKNOWN);
static_assert(ours::kNvmlUuidBufferSize == NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(ours::kNvmlNameBufferSize == NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(ours::kNvmlDriverVersionBufferSize == NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
static_assert(ours::kNvmlVersionBufferSize == NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
static_assert(ours::kNvmlTemperatureGpu == NVML_TEMPERATURE_GPU);
static_assert(ours::kNvmlClockSm == NVML_CLOCK_SM);
static_assert(ours::kNvmlClockMem == NVML_CLOCK_MEM);
static_assert(ours::kNvmlMemoryErrorCorrected == NVML_MEMORY_ERROR_TYPE_CORRECTED);
static_assert(ours::kNvmlMemoryErrorUncorrected == NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
static_assert(ours::kNvmlVolatileEcc == NVML_VOLATILE_ECC);
static_assert(ours::kNvmlValueNotAvailable == NVML_VALUE_NOT_AVAILABLE);

int main() {
  std::printf("nvml_abi_check: src/gpu/nvml_abi.h matches nvml.h (NVML_API_VERSION %d)\n",
              NVML_API_VERSION);
  return 0;
}
