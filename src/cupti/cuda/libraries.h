// libcuda.so.1 and libcupti opened with dlopen, their entry points resolved by the names and
// signatures of the toolkit headers this variant is compiled against.
//
// The helper never links either library: a node without the NVIDIA driver, or with a libcupti
// the driver cannot serve, must still get a probe report with the reason instead of a loader
// error. libcuda is opened from the loader's path (the driver installs it); libcupti from the
// path given, else beside the helper (<helper>/../lib/, where CUPTI archives put it with its
// nvperf siblings), else from the loader's path.
#ifndef EXPANSE_CUPTI_CUDA_LIBRARIES_H_
#define EXPANSE_CUPTI_CUDA_LIBRARIES_H_

#include <cuda.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <cupti_version.h>

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace expanse::cupti {

struct CudaFunctions {
  decltype(&::cuInit) Init;
  decltype(&::cuDriverGetVersion) DriverGetVersion;
  decltype(&::cuDeviceGetCount) DeviceGetCount;
  decltype(&::cuDeviceGet) DeviceGet;
  decltype(&::cuDeviceGetName) DeviceGetName;
  decltype(&::cuDeviceGetUuid) DeviceGetUuid;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cuGetErrorName) GetErrorName;
};

struct CuptiFunctions {
  decltype(&::cuptiGetResultString) GetResultString;
  decltype(&::cuptiGetVersion) GetVersion;
  decltype(&::cuptiProfilerInitialize) ProfilerInitialize;
  decltype(&::cuptiProfilerDeInitialize) ProfilerDeInitialize;
  decltype(&::cuptiProfilerDeviceSupported) ProfilerDeviceSupported;
  decltype(&::cuptiDeviceGetChipName) DeviceGetChipName;
  decltype(&::cuptiPmSamplingGetCounterAvailability) PmSamplingGetCounterAvailability;
  decltype(&::cuptiProfilerHostInitialize) ProfilerHostInitialize;
  decltype(&::cuptiProfilerHostDeinitialize) ProfilerHostDeinitialize;
  decltype(&::cuptiProfilerHostConfigAddMetrics) ProfilerHostConfigAddMetrics;
  decltype(&::cuptiProfilerHostGetConfigImageSize) ProfilerHostGetConfigImageSize;
  decltype(&::cuptiProfilerHostGetConfigImage) ProfilerHostGetConfigImage;
  decltype(&::cuptiProfilerHostGetNumOfPasses) ProfilerHostGetNumOfPasses;
  decltype(&::cuptiProfilerHostEvaluateToGpuValues) ProfilerHostEvaluateToGpuValues;
  decltype(&::cuptiProfilerHostGetMetricProperties) ProfilerHostGetMetricProperties;
  decltype(&::cuptiProfilerHostGetSubMetrics) ProfilerHostGetSubMetrics;
  // Optional (null when this libcupti lacks it): only `plan --chip all` needs the list.
  decltype(&::cuptiProfilerHostGetSupportedChips) ProfilerHostGetSupportedChips;
  decltype(&::cuptiPmSamplingEnable) PmSamplingEnable;
  decltype(&::cuptiPmSamplingDisable) PmSamplingDisable;
  decltype(&::cuptiPmSamplingSetConfig) PmSamplingSetConfig;
  decltype(&::cuptiPmSamplingStart) PmSamplingStart;
  decltype(&::cuptiPmSamplingStop) PmSamplingStop;
  decltype(&::cuptiPmSamplingGetCounterDataSize) PmSamplingGetCounterDataSize;
  decltype(&::cuptiPmSamplingCounterDataImageInitialize) PmSamplingCounterDataImageInitialize;
  decltype(&::cuptiPmSamplingDecodeData) PmSamplingDecodeData;
  decltype(&::cuptiPmSamplingGetCounterDataInfo) PmSamplingGetCounterDataInfo;
  decltype(&::cuptiPmSamplingCounterDataGetSampleInfo) PmSamplingCounterDataGetSampleInfo;
};

// One dlopen'ed library; closes it on destruction.
class LoadedLibrary {
 public:
  // Fails with "<name>_not_found: <dlerror>" or "<name>_symbol_missing: <symbol>".
  static Result<std::unique_ptr<LoadedLibrary>> Open(const std::string& path);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  void* Symbol(const char* name) const;
  const std::string& loaded_path() const { return loaded_path_; }

 private:
  explicit LoadedLibrary(void* handle) : handle_(handle) {}
  void* handle_;
  std::string loaded_path_;
};

class CudaLibrary {
 public:
  // "" = libcuda.so.1 through the loader.
  static Result<std::unique_ptr<CudaLibrary>> Open(const std::string& path);
  const CudaFunctions& fn() const { return fn_; }
  const std::string& loaded_path() const { return library_->loaded_path(); }
  // "CUDA_ERROR_NO_DEVICE"-style name for a result.
  std::string Name(CUresult result) const;

 private:
  std::unique_ptr<LoadedLibrary> library_;
  CudaFunctions fn_{};
};

class CuptiLibrary {
 public:
  // "" = beside the helper, then the loader's path. `host_only`: only the profiler host calls
  // will be made (`plan`), so libnvperf_target.so is not opened: loading it alone fills ~100 MiB
  // of its static data (CUDA 13.0; docs/performance.md, "GPU counter helper").
  static Result<std::unique_ptr<CuptiLibrary>> Open(const std::string& path,
                                                    bool host_only = false);
  const CuptiFunctions& fn() const { return fn_; }
  const std::string& loaded_path() const { return library_->loaded_path(); }
  // The libnvperf_host.so the profiler host calls run on: the one beside libcupti when present
  // (opened first, see Open), else whatever the loader finds; "" until one is loaded.
  std::string perf_host_path() const;

 private:
  // libcupti opens libnvperf_host.so by bare name when the first host call needs it, so the
  // loader's search decides which copy serves, not libcupti's own directory: a node without a
  // toolkit has none (CUPTI_ERROR_NOT_INITIALIZED), one with another toolkit may serve a copy
  // of another version (CUPTI_ERROR_UNKNOWN in cuptiProfilerHostConfigAddMetrics, seen on an
  // H200). Opened from libcupti's directory first, they are found by their soname instead.
  std::vector<std::unique_ptr<LoadedLibrary>> perf_libraries_;
  std::unique_ptr<LoadedLibrary> library_;
  CuptiFunctions fn_{};
};

// "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"-style name of a CUPTI result.
std::string CuptiResultName(CUptiResult result);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_LIBRARIES_H_
