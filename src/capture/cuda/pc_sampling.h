// PC sampling for a Phase B window (CUPTI's cupti_pcsampling.h; the legacy activity kind is
// gone in CUDA 13). While a trace segment is open the agent's worker thread enables it on every
// device's primary context that the job has active, drains CUPTI's PC records once a tick into
// the segment's PcProfile, and disables it before the segment closes. docs/capture-agent.md,
// "PC sampling".
//
// Everything runs on the agent's own thread: the job's primary context is made current there
// (pushed, then popped) around each CUPTI call, so no thread of the job is touched. Only primary
// contexts are found this way (those of the CUDA runtime: PyTorch, JAX, TensorFlow); a context
// a job makes with cuCtxCreate is not sampled. The context is retained while sampled (so it
// cannot go away under CUPTI) and only if the job already has it active: the agent never
// creates one.
#ifndef EXPANSE_CAPTURE_CUDA_PC_SAMPLING_H_
#define EXPANSE_CAPTURE_CUDA_PC_SAMPLING_H_

#include <cuda.h>
#include <cupti_pcsampling.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "capture/pc_profile.h"

namespace expanse::capture {

struct CuptiPcSamplingApi {
  CUptiResult (*Enable)(CUpti_PCSamplingEnableParams*) = nullptr;
  CUptiResult (*Disable)(CUpti_PCSamplingDisableParams*) = nullptr;
  CUptiResult (*GetNumStallReasons)(CUpti_PCSamplingGetNumStallReasonsParams*) = nullptr;
  CUptiResult (*GetStallReasons)(CUpti_PCSamplingGetStallReasonsParams*) = nullptr;
  CUptiResult (*SetConfigurationAttribute)(CUpti_PCSamplingConfigurationInfoParams*) = nullptr;
  CUptiResult (*GetData)(CUpti_PCSamplingGetDataParams*) = nullptr;
};

// The driver calls that find the job's primary contexts, from the libcuda the job loaded.
struct CudaContextApi {
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*PrimaryCtxGetState)(CUdevice, unsigned int*, int*) = nullptr;
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*PrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*CtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*CtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*MemGetInfo)(size_t*, size_t*) = nullptr;  // of the current context's device
};

// The PC sampling calls of the libcupti at `path` (already loaded by the agent); nullopt with
// `error` naming what is missing (a CUPTI older than 11.3 has none).
std::optional<CuptiPcSamplingApi> LoadPcSamplingApi(const std::string& path, std::string* error);
// The context calls of the libcuda.so.1 this process has loaded; nullopt when there is none.
std::optional<CudaContextApi> LoadCudaContextApi(std::string* error);

// Why the node does not let this process sample PCs, or "" when it may try: the driver's
// RmProfilingAdminOnly=1 (/proc/driver/nvidia/params) allows profiling only to a process with
// CAP_SYS_ADMIN or CAP_PERFMON in its effective set (/proc/self/status's CapEff; root has them
// unless a container took them away), and a job's process usually has neither. An unreadable
// driver file decides nothing: CUPTI's own answer then does.
std::string PcSamplingRefusal(std::string_view nvidia_params, std::string_view proc_status);

// Whether a CUPTI error from a PC sampling call means the node restricts profiling (privileges,
// a virtual GPU, confidential computing, a CMP or MIG device) rather than a fault.
bool IsRestriction(CUptiResult result);

struct PcSamplerOptions {
  uint32_t period = 0;                      // 5..31 (2^period cycles); 0 = CUPTI's default
  size_t hardware_buffer_bytes = 32 << 20;  // device memory per context (CUPTI's default: 512 MB)
  // A context whose device has less free memory than the buffer and this is not sampled: the
  // buffer must never be what makes the job's next allocation fail.
  size_t free_memory_margin_bytes = 512 << 20;
  size_t scratch_buffer_bytes = 4 << 20;  // host memory per context, about 22,000 PCs
  size_t pcs_per_buffer = 2000;           // PCs one GetData hands back
  int max_get_data_calls = 64;            // per context per drain
  size_t max_function_names = 65536;      // distinct CUPTI name strings kept (see Drain)
};

struct PcBuffer;

class PcSampler {
 public:
  PcSampler(CuptiPcSamplingApi cupti, CudaContextApi cuda, PcSamplerOptions options);
  ~PcSampler();
  PcSampler(const PcSampler&) = delete;
  PcSampler& operator=(const PcSampler&) = delete;

  struct StartResult {
    int contexts = 0;  // contexts now sampled
    CUptiResult first_error = CUPTI_SUCCESS;
    std::string error;  // the first failure, named with its call, "" when none
  };
  // Enables and configures sampling on every active primary context. A context that fails is
  // left disabled and released.
  StartResult Start(const std::function<std::string(CUptiResult)>& result_name);
  // Hands every PC record CUPTI holds for the sampled contexts to `profile`.
  void Drain(PcProfile& profile);
  // Drain, disable every context (whose last records CUPTI writes into the configuration
  // buffer, read here too), release them; each exactly once, whatever fails on the way.
  void Stop(PcProfile& profile);
  bool active() const { return !contexts_.empty(); }
  uint32_t period() const { return options_.period; }
  // Set once CUPTI handed back as many distinct function-name strings as the bound: CUPTI
  // shares them with activity records, so they are never freed, and the agent stops sampling.
  bool names_exhausted() const { return names_exhausted_; }

 private:
  struct Context;
  // Calls fn with `ctx` current on this thread; false when it cannot be made current.
  template <typename Fn>
  bool WithContext(CUcontext ctx, Fn&& fn);
  // Enabled → GetNumStallReasons, GetStallReasons, buffers, SetConfigurationAttribute; the
  // first failure in *result, its call in *where (and the attribute CUPTI refused).
  void Configure(Context& c, CUptiResult* result, const char** where, std::string* attribute);
  // One buffer's records into `profile`.
  void Take(Context& c, PcBuffer& buffer, PcProfile& profile);
  void DrainOne(Context& c, PcProfile& profile);
  // Disabled (when enabled) and released (when retained), once; never throws.
  void Teardown(Context& c) noexcept;

  CuptiPcSamplingApi cupti_;
  CudaContextApi cuda_;
  PcSamplerOptions options_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::set<const char*> names_seen_;
  bool names_exhausted_ = false;
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_CUDA_PC_SAMPLING_H_
