// A fake libcuda.so.1 for tests on machines without NVIDIA GPUs.
//
// It exports the CUDA driver entry points expanse-cupti-helper resolves (device enumeration and
// error strings; no contexts, memory or kernels) and answers them from the scenario file the fake
// libcupti.so.13 reads too (JSON, see README.md beside this file). With both fakes the helper's
// real dlopen path runs in CI; the real libraries are exercised on a GPU machine.
//
// The prototypes come from NVIDIA's own cuda.h, so a definition that does not match the real
// signature fails to compile. cuda.h maps some names to versioned symbols (cuDeviceGetUuid is
// cuDeviceGetUuid_v2); the real driver exports both names, and so does this fake:
// __CUDA_API_VERSION_INTERNAL makes cuda.h also declare the unversioned prototypes, as it does
// when NVIDIA builds the driver.

#define __CUDA_API_VERSION_INTERNAL 1

#include <cuda.h>
#include <cupti_driver_cbid.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "fake_cupti_scenario.h"

namespace {

using expanse_fake_cupti::Call;
using expanse_fake_cupti::Device;

bool g_initialised = false;  // under the Call lock
bool g_injected = false;     // CUDA_INJECTION64_PATH handled (under cuInit's injection lock)

// What the driver does with CUDA_INJECTION64_PATH at the first successful cuInit of a process:
// load the library and call its InitializeInjection. A library that does not load, or has no
// such function, is passed over (traced as cuInit.injection with the reason).
void LoadInjection() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0')
    return;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  using Initialize = int (*)();
  Initialize initialize = handle != nullptr
                              ? reinterpret_cast<Initialize>(dlsym(handle, "InitializeInjection"))
                              : nullptr;
  std::string detail;
  if (handle == nullptr) {
    const char* why = dlerror();
    detail = std::string("load_failed=") + (why != nullptr ? why : "?");
  } else if (initialize == nullptr) {
    detail = "no_InitializeInjection";
  } else {
    detail = "returned=" + std::to_string(initialize());
  }
  Call call("cuInit.injection");
  call.AddDetail(detail);
}

// The checks every device call makes, in the driver's order: initialised, then a valid ordinal.
CUresult CheckDevice(Call& call, CUdevice dev, const Device** device) {
  if (!g_initialised)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || (*device = call.device(static_cast<uint64_t>(dev))) == nullptr)
    return CUDA_ERROR_INVALID_DEVICE;
  call.SetDevice(static_cast<uint64_t>(dev));
  return CUDA_SUCCESS;
}

// "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10" -> its 16 bytes; a malformed UUID gives zeros.
CUuuid ParseUuid(const std::string& text) {
  CUuuid uuid{};
  std::string hex;
  for (char c : text.substr(text.rfind("GPU-", 0) == 0 ? 4 : 0)) {
    if (c != '-')
      hex += c;
  }
  if (hex.size() != 2 * sizeof uuid.bytes)
    return uuid;
  for (size_t i = 0; i < sizeof uuid.bytes; ++i) {
    unsigned byte = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &byte) != 1)
      return CUuuid{};
    uuid.bytes[i] = static_cast<char>(byte);
  }
  return uuid;
}

// "dddd:bb:dd.f" -> the PCI domain, bus or device number; -1 when the ID does not parse.
int PciField(const std::string& bus_id, CUdevice_attribute attrib) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4)
    return -1;
  if (attrib == CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)
    return static_cast<int>(domain);
  if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
    return static_cast<int>(bus);
  return static_cast<int>(device);
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

// The driver's names and messages for the codes a device-enumerating caller can meet.
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "API call requires a newer CUDA driver"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
     "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code)
      return &e;
  }
  return nullptr;
}

// cuGetErrorName and cuGetErrorString: the driver answers an unknown code with
// CUDA_ERROR_INVALID_VALUE and a null string.
CUresult ErrorLookup(const char* call_name, CUresult error, const char** out, bool name) {
  Call call(call_name);
  call.AddDetail("code=" + std::to_string(static_cast<int>(error)));
  if (out == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  const ErrorText* e = FindError(error);
  *out = e == nullptr ? nullptr : (name ? e->name : e->text);
  return call.Return(e == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

CUresult GetUuid(const char* call_name, CUuuid* uuid, CUdevice dev) {
  Call call(call_name);
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  if (uuid == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  *uuid = ParseUuid(device->uuid);
  return call.Return(CUDA_SUCCESS);
}

// Copies `value` into a caller's buffer of `len` bytes, truncating as the driver does.
CUresult CopyString(const std::string& value, char* out, int len) {
  if (out == nullptr || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  const size_t n = std::min(value.size(), static_cast<size_t>(len) - 1);
  std::memcpy(out, value.data(), n);
  out[n] = '\0';
  return CUDA_SUCCESS;
}

// Primary contexts: one per scenario device (at most 64), active when the device says so. A
// handle is an address in this library; the fake libcupti takes any non-null one. Retains and
// releases are traced with the count after them, so a test sees that every retain was released.
char g_primary[64];
int g_retained[64] = {};  // under the Call lock
thread_local std::vector<CUcontext> t_current;

}  // namespace

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

FAKE_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  return ErrorLookup("cuGetErrorString", error, pStr, /*name=*/false);
}

FAKE_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  return ErrorLookup("cuGetErrorName", error, pStr, /*name=*/true);
}

// A CUDA call the job makes at a rate (expanse-fake-cuda-job --launches), standing for the
// launches and synchronisations of a real job: it reaches CUPTI through the private hook the
// fake libcupti exports (cuptiFakeDriverApi, found once CUPTI is loaded), as the real driver
// reports every API call to an attached CUPTI. Not traced: a job makes thousands a second.
FAKE_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) {
  using Hook = void (*)(uint32_t, const char*);
  static std::atomic<Hook> hook{nullptr};
  Hook h = hook.load();
  if (h == nullptr) {
    h = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "cuptiFakeDriverApi"));
    hook.store(h);
  }
  if (h != nullptr)
    h(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize");
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags) {
  {
    Call call("cuInit");
    call.ForceRefresh();
    if (Flags != 0)
      return call.Return(CUDA_ERROR_INVALID_VALUE);
    const int error = call.scenario().init_error;
    if (error != 0)
      return call.Return(static_cast<CUresult>(error));
    g_initialised = true;
  }
  // Outside the call lock (the injected library may call back into the driver), under one of
  // its own: like the driver, a cuInit racing the first one returns only once the injection
  // has finished.
  static std::mutex injection_mu;
  std::lock_guard<std::mutex> injection_lock(injection_mu);
  if (!g_injected) {
    g_injected = true;
    LoadInjection();
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  Call call("cuDriverGetVersion");
  if (driverVersion == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  *driverVersion = call.scenario().driver_version;
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  Call call("cuDeviceGetCount");
  if (!g_initialised)
    return call.Return(CUDA_ERROR_NOT_INITIALIZED);
  if (count == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  *count = static_cast<int>(call.scenario().devices.size());
  call.AddDetail("count=" + std::to_string(*count));
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  Call call("cuDeviceGet");
  const Device* unused = nullptr;
  if (const CUresult r = CheckDevice(call, ordinal, &unused); r != CUDA_SUCCESS)
    return call.Return(r);
  if (device == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  *device = ordinal;  // the real driver's CUdevice is the ordinal too
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  Call call("cuDeviceGetName");
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  return call.Return(CopyString(device->name, name, len));
}

// The versioned symbol cuda.h maps cuDeviceGetUuid to, and the unversioned one (see the top).
FAKE_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return GetUuid("cuDeviceGetUuid_v2", uuid, dev);
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return GetUuid("cuDeviceGetUuid", uuid, dev);
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                                  CUdevice dev) {
  Call call("cuDeviceGetAttribute");
  call.AddDetail("attribute=" + std::to_string(static_cast<int>(attrib)));
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  if (pi == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *pi = device->cc_major;
      return call.Return(CUDA_SUCCESS);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *pi = device->cc_minor;
      return call.Return(CUDA_SUCCESS);
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: {
      const int value = PciField(device->pci_bus_id, attrib);
      if (value < 0)
        return call.Return(CUDA_ERROR_INVALID_VALUE);
      *pi = value;
      return call.Return(CUDA_SUCCESS);
    }
    default:
      return call.Return(CUDA_ERROR_INVALID_VALUE);  // not modelled
  }
}

FAKE_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                        int* active) {
  Call call("cuDevicePrimaryCtxGetState");
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  if (flags == nullptr || active == nullptr || dev >= 64)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  *flags = 0;
  *active = device->primary_context_active ? 1 : 0;
  call.AddDetail(std::string("active=") + (*active != 0 ? "1" : "0"));
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  Call call("cuDevicePrimaryCtxRetain");
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  if (pctx == nullptr || dev >= 64)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  // The real driver would create an inactive one here (device memory): the trace says so.
  if (!device->primary_context_active)
    call.AddDetail("created");
  *pctx = reinterpret_cast<CUcontext>(&g_primary[dev]);
  call.AddDetail("retained=" + std::to_string(++g_retained[dev]));
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Call call("cuDevicePrimaryCtxRelease_v2");
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  if (dev >= 64 || g_retained[dev] == 0)
    return call.Return(CUDA_ERROR_INVALID_CONTEXT);
  call.AddDetail("retained=" + std::to_string(--g_retained[dev]));
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  const auto* p = reinterpret_cast<const char*>(ctx);
  if (p < g_primary || p >= g_primary + 64)
    return CUDA_ERROR_INVALID_CONTEXT;
  t_current.push_back(ctx);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (t_current.empty())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr)
    *pctx = t_current.back();
  t_current.pop_back();
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  Call call("cuMemGetInfo_v2");
  if (free == nullptr || total == nullptr)
    return call.Return(CUDA_ERROR_INVALID_VALUE);
  if (t_current.empty())
    return call.Return(CUDA_ERROR_INVALID_CONTEXT);
  const Device* device = nullptr;
  const auto dev =
      static_cast<CUdevice>(reinterpret_cast<const char*>(t_current.back()) - g_primary);
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  *free = static_cast<size_t>(device->memory_free_mib) << 20;
  *total = static_cast<size_t>(device->memory_total_mib) << 20;
  call.AddDetail("free_mib=" + std::to_string(device->memory_free_mib));
  return call.Return(CUDA_SUCCESS);
}

FAKE_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (pctx == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_current.empty() ? nullptr : t_current.back();
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  Call call("cuDeviceGetPCIBusId");
  const Device* device = nullptr;
  if (const CUresult r = CheckDevice(call, dev, &device); r != CUDA_SUCCESS)
    return call.Return(r);
  return call.Return(CopyString(device->pci_bus_id, pciBusId, len));
}

}  // extern "C"
