#include "cupti/cuda/libraries.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

namespace expanse::cupti {
namespace {

// The exported name after the header's versioning macros (cuDeviceGetUuid is cuDeviceGetUuid_v2).
#define EXPANSE_SYMBOL_NAME(symbol) EXPANSE_SYMBOL_NAME_(symbol)
#define EXPANSE_SYMBOL_NAME_(symbol) #symbol

template <typename F>
bool Resolve(const LoadedLibrary& library, const char* name, F& out,
             std::vector<std::string>& missing) {
  void* symbol = library.Symbol(name);
  if (symbol == nullptr) {
    missing.emplace_back(name);
    return false;
  }
  out = reinterpret_cast<F>(symbol);
  return true;
}

Status MissingSymbols(const std::string& library, const std::vector<std::string>& missing) {
  std::string list;
  for (const auto& name : missing)
    list += (list.empty() ? "" : ", ") + name;
  return FailedPreconditionError(library + "_symbol_missing: " + list);
}

// <directory of this executable>/../lib/libcupti.so.<major>, where the CUPTI archive puts it.
std::string SiblingCupti() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    return "";
  return (self.parent_path().parent_path() / "lib" /
          ("libcupti.so." + std::to_string(CUDA_VERSION / 1000)))
      .string();
}

}  // namespace

Result<std::unique_ptr<LoadedLibrary>> LoadedLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return NotFoundError(path + ": " + (why != nullptr ? why : "dlopen failed"));
  }
  std::unique_ptr<LoadedLibrary> library(new LoadedLibrary(handle));
  const link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    library->loaded_path_ = map->l_name;
  if (library->loaded_path_.empty())
    library->loaded_path_ = path;
  return library;
}

LoadedLibrary::~LoadedLibrary() { dlclose(handle_); }

void* LoadedLibrary::Symbol(const char* name) const { return dlsym(handle_, name); }

Result<std::unique_ptr<CudaLibrary>> CudaLibrary::Open(const std::string& path) {
  auto opened = LoadedLibrary::Open(path.empty() ? "libcuda.so.1" : path);
  if (!opened.ok())
    return NotFoundError("libcuda_not_found: " + opened.status().message());
  std::unique_ptr<CudaLibrary> cuda(new CudaLibrary());
  cuda->library_ = std::move(*opened);
  const LoadedLibrary& lib = *cuda->library_;
  CudaFunctions& fn = cuda->fn_;
  std::vector<std::string> missing;
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuInit), fn.Init, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDriverGetVersion), fn.DriverGetVersion, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDeviceGetCount), fn.DeviceGetCount, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDeviceGet), fn.DeviceGet, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDeviceGetName), fn.DeviceGetName, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDeviceGetUuid), fn.DeviceGetUuid, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuDeviceGetAttribute), fn.DeviceGetAttribute, missing);
  Resolve(lib, EXPANSE_SYMBOL_NAME(cuGetErrorName), fn.GetErrorName, missing);
  if (!missing.empty())
    return MissingSymbols("libcuda", missing);
  return cuda;
}

std::string CudaLibrary::Name(CUresult result) const {
  const char* name = nullptr;
  if (fn_.GetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr)
    return name;
  // The toolkit's stub library names nothing; the codes a helper meets first are named here.
  switch (result) {
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    default:
      return "CUDA_ERROR_" + std::to_string(static_cast<int>(result));
  }
}

Result<std::unique_ptr<CuptiLibrary>> CuptiLibrary::Open(const std::string& path, bool host_only) {
  std::vector<std::string> tried;
  Result<std::unique_ptr<LoadedLibrary>> opened = NotFoundError("");
  std::vector<std::string> candidates;
  if (!path.empty()) {
    candidates.push_back(path);
  } else {
    const std::string sibling = SiblingCupti();
    if (!sibling.empty() && access(sibling.c_str(), F_OK) == 0)
      candidates.push_back(sibling);
    candidates.push_back("libcupti.so." + std::to_string(CUDA_VERSION / 1000));
  }
  for (const auto& candidate : candidates) {
    opened = LoadedLibrary::Open(candidate);
    if (opened.ok())
      break;
    tried.push_back(opened.status().message());
  }
  if (!opened.ok()) {
    std::string why;
    for (const auto& reason : tried)
      why += (why.empty() ? "" : "; ") + reason;
    return NotFoundError("libcupti_not_found: " + why);
  }
  std::unique_ptr<CuptiLibrary> cupti(new CuptiLibrary());
  // Before any host call: the perf libraries of the same CUPTI release, beside it (the archive's
  // lib/, the toolkit's lib64/). A directory without them leaves the loader's search as it was.
  const std::filesystem::path directory =
      std::filesystem::path((*opened)->loaded_path()).parent_path();
  for (const char* name : {"libnvperf_target.so", "libnvperf_host.so"}) {
    if (host_only && std::string_view(name) == "libnvperf_target.so")
      continue;
    const std::filesystem::path perf = directory / name;
    if (directory.empty() || access(perf.c_str(), F_OK) != 0)
      continue;
    if (auto loaded = LoadedLibrary::Open(perf.string()); loaded.ok())
      cupti->perf_libraries_.push_back(std::move(*loaded));
  }
  cupti->library_ = std::move(*opened);
  const LoadedLibrary& lib = *cupti->library_;
  CuptiFunctions& fn = cupti->fn_;
  std::vector<std::string> missing;
#define EXPANSE_RESOLVE_CUPTI(field, symbol) \
  Resolve(lib, EXPANSE_SYMBOL_NAME(symbol), fn.field, missing)
  EXPANSE_RESOLVE_CUPTI(GetResultString, cuptiGetResultString);
  EXPANSE_RESOLVE_CUPTI(GetVersion, cuptiGetVersion);
  EXPANSE_RESOLVE_CUPTI(ProfilerInitialize, cuptiProfilerInitialize);
  EXPANSE_RESOLVE_CUPTI(ProfilerDeInitialize, cuptiProfilerDeInitialize);
  EXPANSE_RESOLVE_CUPTI(ProfilerDeviceSupported, cuptiProfilerDeviceSupported);
  EXPANSE_RESOLVE_CUPTI(DeviceGetChipName, cuptiDeviceGetChipName);
  EXPANSE_RESOLVE_CUPTI(PmSamplingGetCounterAvailability, cuptiPmSamplingGetCounterAvailability);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostInitialize, cuptiProfilerHostInitialize);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostDeinitialize, cuptiProfilerHostDeinitialize);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostConfigAddMetrics, cuptiProfilerHostConfigAddMetrics);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostGetConfigImageSize, cuptiProfilerHostGetConfigImageSize);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostGetConfigImage, cuptiProfilerHostGetConfigImage);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostGetNumOfPasses, cuptiProfilerHostGetNumOfPasses);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostEvaluateToGpuValues, cuptiProfilerHostEvaluateToGpuValues);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostGetMetricProperties, cuptiProfilerHostGetMetricProperties);
  EXPANSE_RESOLVE_CUPTI(ProfilerHostGetSubMetrics, cuptiProfilerHostGetSubMetrics);
  EXPANSE_RESOLVE_CUPTI(PmSamplingEnable, cuptiPmSamplingEnable);
  EXPANSE_RESOLVE_CUPTI(PmSamplingDisable, cuptiPmSamplingDisable);
  EXPANSE_RESOLVE_CUPTI(PmSamplingSetConfig, cuptiPmSamplingSetConfig);
  EXPANSE_RESOLVE_CUPTI(PmSamplingStart, cuptiPmSamplingStart);
  EXPANSE_RESOLVE_CUPTI(PmSamplingStop, cuptiPmSamplingStop);
  EXPANSE_RESOLVE_CUPTI(PmSamplingGetCounterDataSize, cuptiPmSamplingGetCounterDataSize);
  EXPANSE_RESOLVE_CUPTI(PmSamplingCounterDataImageInitialize,
                        cuptiPmSamplingCounterDataImageInitialize);
  EXPANSE_RESOLVE_CUPTI(PmSamplingDecodeData, cuptiPmSamplingDecodeData);
  EXPANSE_RESOLVE_CUPTI(PmSamplingGetCounterDataInfo, cuptiPmSamplingGetCounterDataInfo);
  EXPANSE_RESOLVE_CUPTI(PmSamplingCounterDataGetSampleInfo,
                        cuptiPmSamplingCounterDataGetSampleInfo);
#undef EXPANSE_RESOLVE_CUPTI
  if (!missing.empty())
    return MissingSymbols("libcupti", missing);
  fn.ProfilerHostGetSupportedChips = reinterpret_cast<decltype(fn.ProfilerHostGetSupportedChips)>(
      lib.Symbol("cuptiProfilerHostGetSupportedChips"));
  return cupti;
}

std::string CuptiLibrary::perf_host_path() const {
  void* handle = dlopen("libnvperf_host.so", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr)
    return "";
  std::string path;
  const link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    path = map->l_name;
  dlclose(handle);
  return path;
}

std::string CuptiResultName(CUptiResult result) {
  switch (result) {
#define EXPANSE_CUPTI_NAME(code) \
  case code:                     \
    return #code
    EXPANSE_CUPTI_NAME(CUPTI_SUCCESS);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_PARAMETER);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_DEVICE);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_CONTEXT);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_OPERATION);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_OUT_OF_MEMORY);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_NOT_INITIALIZED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_METRIC_NAME);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_NOT_COMPATIBLE);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_HARDWARE_BUSY);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_HARDWARE);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_NOT_READY);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_DISABLED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_MAX_LIMIT_REACHED);
#if CUPTI_API_VERSION >= 130000  // names the 12.x headers may lack; older ones print the number
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED);
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_INVALID_CHIP_NAME);
#endif
    EXPANSE_CUPTI_NAME(CUPTI_ERROR_UNKNOWN);
#undef EXPANSE_CUPTI_NAME
    default:
      return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
}

}  // namespace expanse::cupti
