// The PC sampling half of the fake libcupti.so.13 (cupti_pcsampling.h): per CUDA context,
// Enable, the stall reasons, the configuration, GetData and Disable, as NVIDIA's header and
// samples describe them. One Enable..Disable of a context "samples" the scenario's `pcs` once;
// README.md ("PC sampling") has the rules this fake enforces.

#include <cuda.h>
#include <cupti_pcsampling.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fake_cupti_activity.h"
#include "fake_cupti_scenario.h"

namespace {

using expanse_fake_cupti::Call;
using expanse_fake_cupti::PcRecord;

struct ContextState {
  bool configured = false;
  CUpti_PCSamplingData* buffer = nullptr;  // the caller's, from SAMPLING_DATA_BUFFER
  std::vector<PcRecord> pending;           // handed out by GetData
  std::vector<PcRecord> held;              // handed out only at Disable
  bool first_get_data = true;
};

std::map<CUcontext, ContextState> g_contexts;  // enabled contexts, under the Call lock

// Whether `ctx` is current on the calling thread, as the fake libcuda says (traced: the agent
// makes the job's context current on its own thread around every call).
const char* CurrentDetail(CUcontext ctx) {
  using GetCurrent = CUresult (*)(CUcontext*);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto get =
      cuda != nullptr ? reinterpret_cast<GetCurrent>(dlsym(cuda, "cuCtxGetCurrent")) : nullptr;
  CUcontext current = nullptr;
  if (get == nullptr || get(&current) != CUDA_SUCCESS)
    return "current=unknown";
  return current == ctx ? "current=yes" : "current=no";
}

// The enabled context `ctx`, or null (the call then fails with INVALID_OPERATION).
ContextState* Enabled(Call& call, CUcontext ctx) {
  call.AddDetail(CurrentDetail(ctx));
  auto it = g_contexts.find(ctx);
  return it == g_contexts.end() ? nullptr : &it->second;
}

// CUPTI's name strings: one malloc per distinct function, never freed (the real library
// shares them with activity records and leaves freeing to the caller). The map is made at the
// first name and never destroyed, so the strings stay reachable to the end for a leak checker;
// made lazily, since a process that unloads this library (the helper) would otherwise leak it.
char* NameOf(const std::string& function) {
  static auto* const g_names = new std::map<std::string, char*>;
  auto it = g_names->find(function);
  if (it == g_names->end()) {
    char* copy = static_cast<char*>(std::malloc(function.size() + 1));
    std::memcpy(copy, function.c_str(), function.size() + 1);
    it = g_names->emplace(function, copy).first;
  }
  return it->second;
}

// Writes `records` into the caller's buffer; the counts say how many there are and how many
// wait. False when an entry lacks room for its stall reasons.
bool Fill(CUpti_PCSamplingData* out, const std::vector<PcRecord>& records, size_t remaining,
          uint64_t dropped) {
  uint64_t samples = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    CUpti_PCSamplingPCData& pc = out->pPcData[i];
    if (pc.stallReason == nullptr)
      return false;
    pc.cubinCrc = records[i].cubin_crc;
    pc.pcOffset = records[i].pc_offset;
    pc.functionIndex = records[i].function_index;
    pc.functionName = NameOf(records[i].function);
    pc.stallReasonCount = 0;
    for (const auto& [index, count] : records[i].stalls) {
      pc.stallReason[pc.stallReasonCount].pcSamplingStallReasonIndex = index;
      pc.stallReason[pc.stallReasonCount].samples = count;
      ++pc.stallReasonCount;
      samples += count;
    }
  }
  out->totalNumPcs = records.size();
  out->remainingNumPcs = remaining;
  out->totalSamples = samples + dropped;
  out->droppedSamples = dropped;
  out->rangeId = 0;
  out->hardwareBufferFull = 0;
  return true;
}

// Moves at most `limit` records from the front of `from`.
std::vector<PcRecord> Take(std::vector<PcRecord>& from, size_t limit) {
  const size_t n = std::min(limit, from.size());
  std::vector<PcRecord> taken(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
  from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
  return taken;
}

}  // namespace

namespace expanse_fake_cupti {

size_t PcSamplingEnabledContexts() { return g_contexts.size(); }

}  // namespace expanse_fake_cupti

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPCSamplingEnable(CUpti_PCSamplingEnableParams* p) {
  Call call("cuptiPCSamplingEnable");
  if (p == nullptr || p->size == 0 || p->ctx == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail(CurrentDetail(p->ctx));
  const auto& scenario = call.scenario().pc_sampling;
  if (scenario.enable_error != 0)
    return call.Return(static_cast<CUptiResult>(scenario.enable_error));
  if (g_contexts.count(p->ctx) != 0)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  ContextState state;
  state.pending = scenario.pcs;
  const size_t held = std::min(scenario.held_for_disable, state.pending.size());
  state.held.assign(state.pending.end() - static_cast<std::ptrdiff_t>(held), state.pending.end());
  state.pending.resize(state.pending.size() - held);
  g_contexts[p->ctx] = state;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPCSamplingGetNumStallReasons(CUpti_PCSamplingGetNumStallReasonsParams* p) {
  Call call("cuptiPCSamplingGetNumStallReasons");
  if (p == nullptr || p->size == 0 || p->numStallReasons == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (Enabled(call, p->ctx) == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  const auto& scenario = call.scenario().pc_sampling;
  if (scenario.stall_reasons_error != 0)
    return call.Return(static_cast<CUptiResult>(scenario.stall_reasons_error));
  *p->numStallReasons = scenario.stall_reasons.size();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPCSamplingGetStallReasons(CUpti_PCSamplingGetStallReasonsParams* p) {
  Call call("cuptiPCSamplingGetStallReasons");
  if (p == nullptr || p->size == 0 || p->stallReasonIndex == nullptr || p->stallReasons == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (Enabled(call, p->ctx) == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  const auto& reasons = call.scenario().pc_sampling.stall_reasons;
  if (p->numStallReasons != reasons.size())
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (p->stallReasons[i] == nullptr)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    p->stallReasonIndex[i] = reasons[i].first;
    std::strncpy(p->stallReasons[i], reasons[i].second.c_str(), CUPTI_STALL_REASON_STRING_SIZE - 1);
    p->stallReasons[i][CUPTI_STALL_REASON_STRING_SIZE - 1] = '\0';
  }
  return call.Return(CUPTI_SUCCESS);
}

// Checks every attribute (each gets its status); the sampling data buffer is required.
FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPCSamplingSetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams* p) {
  Call call("cuptiPCSamplingSetConfigurationAttribute");
  if (p == nullptr || p->size == 0 || p->pPCSamplingConfigurationInfo == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  ContextState* state = Enabled(call, p->ctx);
  if (state == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  const int error = call.scenario().pc_sampling.set_config_error;
  if (error != 0)
    return call.Return(static_cast<CUptiResult>(error));
  CUpti_PCSamplingData* buffer = nullptr;
  for (size_t i = 0; i < p->numAttributes; ++i) {
    CUpti_PCSamplingConfigurationInfo& info = p->pPCSamplingConfigurationInfo[i];
    info.attributeStatus = CUPTI_SUCCESS;
    switch (info.attributeType) {
      case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD: {
        const uint32_t period = info.attributeData.samplingPeriodData.samplingPeriod;
        call.AddDetail("period=" + std::to_string(period));
        if (period < 5 || period > 31)
          info.attributeStatus = CUPTI_ERROR_INVALID_PARAMETER;
        break;
      }
      case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
        call.AddDetail(
            "hardware_buffer=" +
            std::to_string(info.attributeData.hardwareBufferSizeData.hardwareBufferSize));
        break;
      case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
        call.AddDetail(info.attributeData.collectionModeData.collectionMode ==
                               CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS
                           ? "mode=continuous"
                           : "mode=serialized");
        break;
      case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER:
        buffer = static_cast<CUpti_PCSamplingData*>(
            info.attributeData.samplingDataBufferData.samplingDataBuffer);
        if (buffer == nullptr || buffer->size == 0 || buffer->collectNumPcs == 0 ||
            buffer->pPcData == nullptr)
          info.attributeStatus = CUPTI_ERROR_INVALID_PARAMETER;
        break;
      default:
        break;
    }
    if (info.attributeStatus != CUPTI_SUCCESS)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  }
  if (buffer == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  state->buffer = buffer;
  state->configured = true;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPCSamplingGetData(CUpti_PCSamplingGetDataParams* p) {
  Call call("cuptiPCSamplingGetData");
  if (p == nullptr || p->size == 0 || p->pcSamplingData == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  ContextState* state = Enabled(call, p->ctx);
  if (state == nullptr || !state->configured)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  const auto& scenario = call.scenario().pc_sampling;
  if (scenario.get_data_error != 0)
    return call.Return(static_cast<CUptiResult>(scenario.get_data_error));
  auto* out = static_cast<CUpti_PCSamplingData*>(p->pcSamplingData);
  if (out->size == 0 || out->pPcData == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  size_t limit = out->collectNumPcs;
  if (scenario.pcs_per_get_data != 0)
    limit = std::min(limit, scenario.pcs_per_get_data);
  const std::vector<PcRecord> records = Take(state->pending, limit);
  const uint64_t dropped = state->first_get_data ? scenario.dropped_samples : 0;
  state->first_get_data = false;
  if (!Fill(out, records, state->pending.size(), dropped))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("pcs=" + std::to_string(records.size()) +
                 " remaining=" + std::to_string(state->pending.size()));
  return call.Return(CUPTI_SUCCESS);
}

// Tears the context's sampling down: what GetData never took (and the held records) goes into
// the configuration buffer, as far as it has room; the rest is lost.
FAKE_EXPORT CUptiResult CUPTIAPI cuptiPCSamplingDisable(CUpti_PCSamplingDisableParams* p) {
  Call call("cuptiPCSamplingDisable");
  if (p == nullptr || p->size == 0)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  ContextState* state = Enabled(call, p->ctx);
  if (state == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  std::vector<PcRecord> left = state->pending;
  left.insert(left.end(), state->held.begin(), state->held.end());
  if (state->buffer != nullptr) {
    const std::vector<PcRecord> written = Take(left, state->buffer->collectNumPcs);
    Fill(state->buffer, written, 0, 0);
    call.AddDetail("leftovers=" + std::to_string(written.size()) +
                   " lost=" + std::to_string(left.size()));
  }
  g_contexts.erase(p->ctx);
  return call.Return(CUPTI_SUCCESS);
}

}  // extern "C"
