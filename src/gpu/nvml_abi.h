// The slice of NVML's C ABI that the NVML backend and the fake libnvidia-ml (tests/fakes/nvml)
// use. No NVIDIA package exists in Debian, so nvml.h is not available at build time; these
// declarations follow NVIDIA's public NVML API reference. tests/gpu/nvml_abi_check.cc compares
// every struct layout and constant here with the real nvml.h on a machine that has one
// (scripts/gpu-check runs it on the GPU machine).
//
// Only calls whose ABI has been stable since NVML 11 (R450) are used; newer variants
// (e.g. nvmlDeviceGetCurrentClocksEventReasons) are optional symbols with an older fallback.

#ifndef EXPANSE_GPU_NVML_ABI_H_
#define EXPANSE_GPU_NVML_ABI_H_

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized on every supported ABI
typedef struct nvmlDevice_st* nvmlDevice_t;

// Return codes the backend tells apart.
inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorUninitialized = 1;
inline constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorNoPermission = 4;
inline constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
inline constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kNvmlErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kNvmlErrorTimeout = 10;
inline constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kNvmlErrorNoData = 21;
inline constexpr nvmlReturn_t kNvmlErrorUnknown = 999;

// Buffer sizes nvml.h names NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE,
// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE and NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE.
inline constexpr unsigned kNvmlUuidBufferSize = 96;
inline constexpr unsigned kNvmlNameBufferSize = 96;
inline constexpr unsigned kNvmlDriverVersionBufferSize = 80;
inline constexpr unsigned kNvmlVersionBufferSize = 80;

// Enum values passed as arguments.
inline constexpr int kNvmlTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
inline constexpr int kNvmlClockSm = 1;                 // NVML_CLOCK_SM
inline constexpr int kNvmlClockMem = 2;                // NVML_CLOCK_MEM
inline constexpr int kNvmlMemoryErrorCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
inline constexpr int kNvmlMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr int kNvmlVolatileEcc = 0;             // NVML_VOLATILE_ECC

// usedGpuMemory when the driver withholds it (NVML_VALUE_NOT_AVAILABLE).
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

struct nvmlMemory_t {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;     // percent
  unsigned int memory;  // percent
};

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:00:06.0"
};

// nvmlProcessInfo_v2_t, which both nvmlDeviceGetComputeRunningProcesses_v2 and _v3 take.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or kNvmlValueNotAvailable
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // microseconds, CPU clock
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

}  // extern "C"

#endif  // EXPANSE_GPU_NVML_ABI_H_
