// The CUPTI Activity API as the capture agent uses it: libcupti opened at run time (so a node
// without it, or with a wrong one, leaves the job untouched rather than failing the load) and
// CUPTI's activity records decoded into capture::Activity. Compiled per CUPTI variant against
// that variant's headers, whose record layouts are the ones its libcupti writes.
#ifndef EXPANSE_CAPTURE_CUDA_CUPTI_ACTIVITY_H_
#define EXPANSE_CAPTURE_CUDA_CUPTI_ACTIVITY_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "capture/activity.h"

namespace expanse::capture {

struct CuptiActivityApi {
  std::string path;  // the libcupti that was loaded
  CUptiResult (*RegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*Enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*Disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*FlushAll)(uint32_t) = nullptr;
  CUptiResult (*GetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*GetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  // Detaching CUPTI between bursts and finding another subscriber (the job's own profiler):
  // optional, null where the library lacks them (the agent then stays attached). CUDA 12.x
  // has no cuptiSubscribe_v2 (which names the subscriber in the way); cuptiSubscribe then.
  CUptiResult (*SubscribeV2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                             CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*Finalize)() = nullptr;

  bool CanDetach() const {
    return (SubscribeV2 != nullptr || Subscribe != nullptr) && Unsubscribe != nullptr &&
           EnableDomain != nullptr && Finalize != nullptr;
  }
  // "CUPTI_ERROR_…" for a result code (its number when the library cannot say).
  std::string ResultName(CUptiResult result) const;
};

// The path of a libcupti.so.<major> this process has loaded already (a job's framework brings
// its own: PyTorch maps the one of its CUDA wheels), or "" when there is none. The agent uses
// that copy rather than a second one: CUPTI keeps one subscriber and one set of activity
// buffers per library, so only on the job's own copy can the agent see the job's profiler and
// stay out of its way.
std::string LoadedLibcupti(const std::string& major);

// Opens the first of `candidates` that loads and has every entry point; nullopt with `error`
// naming each candidate's problem otherwise.
std::optional<CuptiActivityApi> LoadCuptiActivityApi(const std::vector<std::string>& candidates,
                                                     std::string* error);

// Pairs NVTX range starts with their ends (CUPTI reports them as two marker records sharing an
// id). Bounded: past kMaxOpenRanges open ranges, the oldest are forgotten; names are cut to
// kMaxNameBytes.
class NvtxRanges {
 public:
  static constexpr size_t kMaxOpenRanges = 4096;
  void Start(uint32_t id, std::string name, uint64_t start_ns);
  // The range's name and start when `id` was open; it is then closed.
  std::optional<std::pair<std::string, uint64_t>> End(uint32_t id);

 private:
  std::map<uint32_t, std::pair<std::string, uint64_t>> open_;
  std::deque<uint32_t> order_;  // ids in the order they started
};

// Decodes every record of one completed buffer, shifting CUPTI's timestamps by `offset_ns` to
// Unix time, and hands the ones the agent keeps to `sink`.
void DecodeActivityBuffer(const CuptiActivityApi& api, uint8_t* buffer, size_t valid_bytes,
                          int64_t offset_ns, NvtxRanges& nvtx,
                          const std::function<void(const Activity&)>& sink);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_CUDA_CUPTI_ACTIVITY_H_
