#include "capture/cuda/pc_sampling.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "capture/cuda/dl_symbols.h"
#include "cupti/node_facts.h"

namespace expanse::capture {

// A buffer CUPTI writes PC records into: `pcs` entries, each with room for every stall
// reason. GetData and the configuration (which Disable, or a context's teardown, fills) get a
// buffer each, so a teardown on a job's thread never writes where the agent is reading.
struct PcBuffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<std::vector<CUpti_PCSamplingStallReason>> stalls;

  void Init(size_t entries, size_t reasons) {
    pcs.assign(entries, CUpti_PCSamplingPCData{});
    stalls.assign(entries, std::vector<CUpti_PCSamplingStallReason>(reasons));
    for (size_t i = 0; i < entries; ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = stalls[i].data();
    }
    data = CUpti_PCSamplingData{};
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = entries;
    data.pPcData = pcs.data();
  }
};

struct PcSampler::Context {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  bool retained = false;
  bool enabled = false;
  std::map<uint32_t, std::string> stall_names;  // CUPTI's index -> its name
  size_t stall_reason_count = 0;
  PcBuffer data;    // GetData's
  PcBuffer config;  // the configuration's (SAMPLING_DATA_BUFFER)
};

namespace {

// The job's context current on this thread for the guard's life (popped however it ends).
class CurrentContext {
 public:
  CurrentContext(const CudaContextApi& cuda, CUcontext ctx)
      : cuda_(cuda), pushed_(cuda.CtxPushCurrent(ctx) == CUDA_SUCCESS) {}
  ~CurrentContext() {
    CUcontext popped = nullptr;
    if (pushed_)
      cuda_.CtxPopCurrent(&popped);
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;
  bool pushed() const { return pushed_; }

 private:
  const CudaContextApi& cuda_;
  const bool pushed_;
};

// Zeroed, with the size field CUPTI checks set.
template <typename Params>
Params Zeroed(size_t size, CUcontext ctx) {
  Params p{};
  p.size = size;
  p.ctx = ctx;
  return p;
}

}  // namespace

std::optional<CuptiPcSamplingApi> LoadPcSamplingApi(const std::string& path, std::string* error) {
  // The agent opened this library already (RTLD_GLOBAL); this only takes another reference.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    *error = path + " is not loaded";
    return std::nullopt;
  }
  CuptiPcSamplingApi api;
  std::string missing;
  ResolveSymbol(handle, "cuptiPCSamplingEnable", api.Enable, missing);
  ResolveSymbol(handle, "cuptiPCSamplingDisable", api.Disable, missing);
  ResolveSymbol(handle, "cuptiPCSamplingGetNumStallReasons", api.GetNumStallReasons, missing);
  ResolveSymbol(handle, "cuptiPCSamplingGetStallReasons", api.GetStallReasons, missing);
  ResolveSymbol(handle, "cuptiPCSamplingSetConfigurationAttribute", api.SetConfigurationAttribute,
                missing);
  ResolveSymbol(handle, "cuptiPCSamplingGetData", api.GetData, missing);
  if (!missing.empty()) {
    *error = path + " lacks " + missing;
    return std::nullopt;
  }
  return api;
}

std::optional<CudaContextApi> LoadCudaContextApi(std::string* error) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    *error = "libcuda.so.1 is not loaded";
    return std::nullopt;
  }
  CudaContextApi api;
  std::string missing;
  ResolveSymbol(handle, "cuDeviceGetCount", api.DeviceGetCount, missing);
  ResolveSymbol(handle, "cuDeviceGet", api.DeviceGet, missing);
  ResolveSymbol(handle, "cuDevicePrimaryCtxGetState", api.PrimaryCtxGetState, missing);
  ResolveSymbol(handle, "cuDevicePrimaryCtxRetain", api.PrimaryCtxRetain, missing);
  ResolveSymbol(handle, "cuDevicePrimaryCtxRelease_v2", api.PrimaryCtxRelease, missing);
  ResolveSymbol(handle, "cuCtxPushCurrent_v2", api.CtxPushCurrent, missing);
  ResolveSymbol(handle, "cuCtxPopCurrent_v2", api.CtxPopCurrent, missing);
  ResolveSymbol(handle, "cuMemGetInfo_v2", api.MemGetInfo, missing);
  if (!missing.empty()) {
    *error = "libcuda.so.1 lacks " + missing;
    return std::nullopt;
  }
  return api;
}

std::string PcSamplingRefusal(std::string_view nvidia_params, std::string_view proc_status) {
  if (cupti::ParseRmProfilingAdminOnly(nvidia_params).value_or(0) != 1)
    return "";
  const std::optional<uint64_t> caps = cupti::ParseEffectiveCapabilities(proc_status);
  if (caps && (cupti::HasCapability(*caps, cupti::kCapSysAdmin) ||
               cupti::HasCapability(*caps, cupti::kCapPerfmon)))
    return "";
  return "the driver allows profiling only to administrators (RmProfilingAdminOnly=1) and the "
         "job's process has neither CAP_SYS_ADMIN nor CAP_PERFMON";
}

bool IsRestriction(CUptiResult result) {
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
      return true;
    default:
      return false;
  }
}

PcSampler::PcSampler(CuptiPcSamplingApi cupti, CudaContextApi cuda, PcSamplerOptions options)
    : cupti_(cupti), cuda_(cuda), options_(options) {}

PcSampler::~PcSampler() = default;

template <typename Fn>
bool PcSampler::WithContext(CUcontext ctx, Fn&& fn) {
  CurrentContext current(cuda_, ctx);
  if (!current.pushed())
    return false;
  fn();
  return true;
}

void PcSampler::Teardown(Context& c) noexcept {
  if (c.enabled) {
    c.enabled = false;
    CurrentContext current(cuda_, c.ctx);
    auto disable = Zeroed<CUpti_PCSamplingDisableParams>(CUpti_PCSamplingDisableParamsSize, c.ctx);
    cupti_.Disable(&disable);
  }
  if (c.retained) {
    c.retained = false;
    cuda_.PrimaryCtxRelease(c.device);
  }
}

PcSampler::StartResult PcSampler::Start(
    const std::function<std::string(CUptiResult)>& result_name) {
  StartResult result;
  int count = 0;
  if (cuda_.DeviceGetCount(&count) != CUDA_SUCCESS)
    count = 0;
  count = std::min(count, 64);
  contexts_.reserve(static_cast<size_t>(count));  // so keeping a context cannot throw
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int active = 0;
    // Only a context the job has: retaining an inactive one would create it (device memory).
    // (The job could reset it between the two calls; the retain would then make it again.)
    if (cuda_.DeviceGet(&device, ordinal) != CUDA_SUCCESS ||
        cuda_.PrimaryCtxGetState(device, &flags, &active) != CUDA_SUCCESS || active == 0)
      continue;
    auto c = std::make_unique<Context>();
    c->device = device;
    if (cuda_.PrimaryCtxRetain(&c->ctx, device) != CUDA_SUCCESS)
      continue;
    c->retained = true;
    CUptiResult r = CUPTI_SUCCESS;
    const char* where = "cuCtxPushCurrent";
    std::string attribute;
    std::string low_memory;  // why the device's free memory is too little, when it is
    try {
      const bool current = WithContext(c->ctx, [&] {
        // The hardware buffer is the job's device memory: only where it leaves a margin.
        size_t free_bytes = 0, total_bytes = 0;
        const size_t needed = options_.hardware_buffer_bytes + options_.free_memory_margin_bytes;
        if (cuda_.MemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) {
          low_memory = "its free GPU memory could not be read (cuMemGetInfo)";
          return;
        }
        if (free_bytes < needed) {
          low_memory = std::to_string(free_bytes >> 20) + " MiB of GPU memory free, below the " +
                       std::to_string(needed >> 20) +
                       " MiB PC sampling's buffer needs with a margin: left to the job";
          return;
        }
        auto enable =
            Zeroed<CUpti_PCSamplingEnableParams>(CUpti_PCSamplingEnableParamsSize, c->ctx);
        where = "cuptiPCSamplingEnable";
        r = cupti_.Enable(&enable);
        if (r != CUPTI_SUCCESS)
          return;
        c->enabled = true;
        Configure(*c, &r, &where, &attribute);
      });
      if (!current)
        r = CUPTI_ERROR_INVALID_CONTEXT;
      else if (!low_memory.empty())
        r = CUPTI_ERROR_OUT_OF_MEMORY;
    } catch (...) {
      r = CUPTI_ERROR_OUT_OF_MEMORY;  // the agent's own allocations
      where = "the agent's buffers";
    }
    if (r == CUPTI_SUCCESS) {
      contexts_.push_back(std::move(c));
      continue;
    }
    // Undone before anything else can throw: the context is never left sampled or retained.
    Teardown(*c);
    if (result.error.empty()) {
      result.first_error = r;
      result.error =
          !low_memory.empty() ? low_memory : std::string(where) + attribute + ": " + result_name(r);
    }
  }
  result.contexts = static_cast<int>(contexts_.size());
  return result;
}

void PcSampler::Configure(Context& c, CUptiResult* result, const char** where,
                          std::string* attribute) {
  size_t count = 0;
  auto num = Zeroed<CUpti_PCSamplingGetNumStallReasonsParams>(
      CUpti_PCSamplingGetNumStallReasonsParamsSize, c.ctx);
  num.numStallReasons = &count;
  *where = "cuptiPCSamplingGetNumStallReasons";
  if ((*result = cupti_.GetNumStallReasons(&num)) != CUPTI_SUCCESS)
    return;
  count = std::min<size_t>(count, 1024);
  if (count > 0) {
    std::vector<uint32_t> indices(count);
    std::vector<std::vector<char>> names(count, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
    std::vector<char*> name_ptrs(count);
    for (size_t i = 0; i < count; ++i)
      name_ptrs[i] = names[i].data();
    auto reasons = Zeroed<CUpti_PCSamplingGetStallReasonsParams>(
        CUpti_PCSamplingGetStallReasonsParamsSize, c.ctx);
    reasons.numStallReasons = count;
    reasons.stallReasonIndex = indices.data();
    reasons.stallReasons = name_ptrs.data();
    *where = "cuptiPCSamplingGetStallReasons";
    if ((*result = cupti_.GetStallReasons(&reasons)) != CUPTI_SUCCESS)
      return;
    for (size_t i = 0; i < count; ++i) {
      names[i].back() = '\0';
      c.stall_names[indices[i]] = names[i].data();
    }
  }
  c.stall_reason_count = count;
  c.data.Init(options_.pcs_per_buffer, count);
  c.config.Init(options_.pcs_per_buffer, count);

  std::vector<CUpti_PCSamplingConfigurationInfo> info;
  auto add = [&info](CUpti_PCSamplingConfigurationAttributeType type) -> auto& {
    CUpti_PCSamplingConfigurationInfo entry{};
    entry.attributeType = type;
    info.push_back(entry);
    return info.back().attributeData;
  };
  if (options_.period != 0)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD)
        .samplingPeriodData.samplingPeriod = options_.period;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE)
      .hardwareBufferSizeData.hardwareBufferSize = options_.hardware_buffer_bytes;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE)
      .scratchBufferSizeData.scratchBufferSize = options_.scratch_buffer_bytes;
  // Continuous: the job's kernels keep running concurrently (serialised mode would slow it).
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE).collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT)
      .outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER)
      .samplingDataBufferData.samplingDataBuffer = &c.config.data;
  auto config = Zeroed<CUpti_PCSamplingConfigurationInfoParams>(
      CUpti_PCSamplingConfigurationInfoParamsSize, c.ctx);
  config.numAttributes = info.size();
  config.pPCSamplingConfigurationInfo = info.data();
  *where = "cuptiPCSamplingSetConfigurationAttribute";
  if ((*result = cupti_.SetConfigurationAttribute(&config)) != CUPTI_SUCCESS)
    return;
  for (const auto& entry : info) {
    if (entry.attributeStatus != CUPTI_SUCCESS) {
      *result = entry.attributeStatus;
      *attribute = " (attribute " + std::to_string(static_cast<int>(entry.attributeType)) + ")";
      return;
    }
  }
}

void PcSampler::Take(Context& c, PcBuffer& buffer, PcProfile& profile) {
  CUpti_PCSamplingData& data = buffer.data;
  const uint64_t total = data.totalSamples, dropped = data.droppedSamples;
  const bool full = data.hardwareBufferFull != 0;
  const size_t n = std::min(data.totalNumPcs, buffer.pcs.size());
  // Counted once: CUPTI writes them afresh at each GetData and at Disable.
  data.totalNumPcs = 0;
  data.remainingNumPcs = 0;
  data.totalSamples = 0;
  data.droppedSamples = 0;
  data.hardwareBufferFull = 0;
  profile.AddTotals(total, dropped, full);
  for (size_t i = 0; i < n; ++i) {
    const CUpti_PCSamplingPCData& pc = buffer.pcs[i];
    // CUPTI allocates the name and shares it with activity records, so the agent never frees
    // it; past the bound of distinct names it stops sampling (see names_exhausted).
    if (pc.functionName != nullptr && !names_exhausted_ &&
        names_seen_.insert(pc.functionName).second &&
        names_seen_.size() >= options_.max_function_names)
      names_exhausted_ = true;
    const std::string_view function = pc.functionName != nullptr ? pc.functionName : "";
    const size_t reasons = std::min(pc.stallReasonCount, c.stall_reason_count);
    for (size_t j = 0; j < reasons; ++j) {
      const auto name = c.stall_names.find(pc.stallReason[j].pcSamplingStallReasonIndex);
      profile.Add({.function = function,
                   .cubin_crc = pc.cubinCrc,
                   .pc_offset = pc.pcOffset,
                   .stall_reason = name != c.stall_names.end() ? name->second : "unknown",
                   .samples = pc.stallReason[j].samples});
    }
  }
}

void PcSampler::DrainOne(Context& c, PcProfile& profile) {
  WithContext(c.ctx, [&] {
    // At least once (the first call pulls what the hardware buffer still holds), then until
    // CUPTI has nothing left.
    for (int call = 0; call < options_.max_get_data_calls; ++call) {
      auto get = Zeroed<CUpti_PCSamplingGetDataParams>(CUpti_PCSamplingGetDataParamsSize, c.ctx);
      get.pcSamplingData = &c.data.data;
      const CUptiResult r = cupti_.GetData(&get);
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
        // The hardware buffer filled and CUPTI lost what did not fit: counted once per drain.
        profile.AddTotals(0, 0, true);
        return;
      }
      if (r != CUPTI_SUCCESS)
        return;
      const bool more = c.data.data.remainingNumPcs > 0;
      const bool any = c.data.data.totalNumPcs > 0;
      Take(c, c.data, profile);
      if (!any && !more)
        return;
    }
  });
}

void PcSampler::Drain(PcProfile& profile) {
  for (auto& c : contexts_)
    DrainOne(*c, profile);
}

void PcSampler::Stop(PcProfile& profile) {
  // Taken out first: whatever happens below, each context is torn down exactly once.
  std::vector<std::unique_ptr<Context>> contexts;
  contexts.swap(contexts_);
  for (auto& c : contexts) {
    try {
      DrainOne(*c, profile);
      WithContext(c->ctx, [&] {
        auto disable =
            Zeroed<CUpti_PCSamplingDisableParams>(CUpti_PCSamplingDisableParamsSize, c->ctx);
        c->enabled = false;
        // Disable writes what CUPTI still held into the configuration's buffer.
        if (cupti_.Disable(&disable) == CUPTI_SUCCESS)
          Take(*c, c->config, profile);
      });
    } catch (...) {
    }
    Teardown(*c);
  }
}

}  // namespace expanse::capture
