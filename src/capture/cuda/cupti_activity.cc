#include "capture/cuda/cupti_activity.h"

#include <dlfcn.h>
#include <link.h>

#include "capture/activity_window.h"
#include "capture/cuda/dl_symbols.h"

namespace expanse::capture {
namespace {

// Unsigned: wraps instead of overflowing whatever CUPTI reports.
uint64_t Shift(uint64_t cupti_ns, int64_t offset_ns) {
  return cupti_ns + static_cast<uint64_t>(offset_ns);
}

const char* CopyDirection(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "htod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "dtoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "dtod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "htoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "ptop";
    default:
      return "other";
  }
}

const char* SyncType(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "device";  // cudaDeviceSynchronize and cuCtxSynchronize
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "stream_wait_event";
    default:
      return "other";
  }
}

}  // namespace

std::string CuptiActivityApi::ResultName(CUptiResult result) const {
  const char* text = nullptr;
  if (GetResultString != nullptr && GetResultString(result, &text) == CUPTI_SUCCESS &&
      text != nullptr)
    return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

std::optional<CuptiActivityApi> LoadCuptiActivityApi(const std::vector<std::string>& candidates,
                                                     std::string* error) {
  for (const std::string& candidate : candidates) {
    if (candidate.empty())
      continue;
    dlerror();
    // RTLD_GLOBAL: NVTX's injection loader and CUDA find the same libcupti again by name.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      *error += (error->empty() ? "" : "; ") + candidate + ": " + (why ? why : "dlopen failed");
      continue;
    }
    CuptiActivityApi api;
    std::string missing;
    ResolveSymbol(handle, "cuptiActivityRegisterCallbacks", api.RegisterCallbacks, missing);
    ResolveSymbol(handle, "cuptiActivityEnable", api.Enable, missing);
    ResolveSymbol(handle, "cuptiActivityDisable", api.Disable, missing);
    ResolveSymbol(handle, "cuptiActivityFlushAll", api.FlushAll, missing);
    ResolveSymbol(handle, "cuptiActivityGetNextRecord", api.GetNextRecord, missing);
    ResolveSymbol(handle, "cuptiActivityGetNumDroppedRecords", api.GetNumDroppedRecords, missing);
    ResolveSymbol(handle, "cuptiGetTimestamp", api.GetTimestamp, missing);
    ResolveSymbol(handle, "cuptiGetResultString", api.GetResultString, missing);
    std::string optional_missing;  // detaching is optional: the agent then stays attached
    ResolveSymbol(handle, "cuptiSubscribe_v2", api.SubscribeV2, optional_missing);
    ResolveSymbol(handle, "cuptiSubscribe", api.Subscribe, optional_missing);
    ResolveSymbol(handle, "cuptiUnsubscribe", api.Unsubscribe, optional_missing);
    ResolveSymbol(handle, "cuptiEnableDomain", api.EnableDomain, optional_missing);
    ResolveSymbol(handle, "cuptiFinalize", api.Finalize, optional_missing);
    if (!missing.empty()) {
      *error += (error->empty() ? "" : "; ") + candidate + ": missing " + missing;
      dlclose(handle);
      continue;
    }
    const link_map* map = nullptr;
    api.path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name
                   ? map->l_name
                   : candidate;
    return api;  // the handle stays open for the life of the process
  }
  return std::nullopt;
}

std::string LoadedLibcupti(const std::string& major) {
  struct Search {
    std::string prefix;
    std::string found;
  } search{"libcupti.so." + major, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& s = *static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || info->dlpi_name[0] != '/')
          return 0;
        const std::string path = info->dlpi_name;
        const std::string base = path.substr(path.rfind('/') + 1);
        // libcupti.so.13 or libcupti.so.13.0.x; not libcupti.so.130.
        if (base.rfind(s.prefix, 0) != 0 ||
            (base.size() > s.prefix.size() && base[s.prefix.size()] != '.'))
          return 0;
        s.found = path;
        return 1;
      },
      &search);
  return search.found;
}

void NvtxRanges::Start(uint32_t id, std::string name, uint64_t start_ns) {
  while (open_.size() >= kMaxOpenRanges && !order_.empty()) {
    open_.erase(order_.front());  // the oldest still open (a no-op when it has ended)
    order_.pop_front();
  }
  open_[id] = {BoundedName(name), start_ns};
  order_.push_back(id);
  if (order_.size() > 2 * kMaxOpenRanges) {
    // Ended ranges leave their ids behind in order_; drop the ones no longer open.
    std::deque<uint32_t> live;
    for (uint32_t open_id : order_) {
      if (open_.count(open_id) != 0)
        live.push_back(open_id);
    }
    order_ = std::move(live);
  }
}

std::optional<std::pair<std::string, uint64_t>> NvtxRanges::End(uint32_t id) {
  auto it = open_.find(id);
  if (it == open_.end())
    return std::nullopt;
  auto range = std::move(it->second);
  open_.erase(it);
  return range;
}

void DecodeActivityBuffer(const CuptiActivityApi& api, uint8_t* buffer, size_t valid_bytes,
                          int64_t offset_ns, NvtxRanges& nvtx,
                          const std::function<void(const Activity&)>& sink) {
  CUpti_Activity* record = nullptr;
  while (api.GetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS && record != nullptr) {
    Activity a;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        a.kind = ActivityKind::kKernel;
        a.start_ns = Shift(k->start, offset_ns);
        a.end_ns = Shift(k->end, offset_ns);
        a.device = k->deviceId;
        a.stream = k->streamId;
        a.name = k->name != nullptr ? k->name : "";
        a.grid = {k->gridX, k->gridY, k->gridZ};
        a.block = {k->blockX, k->blockY, k->blockZ};
        sink(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        a.kind = ActivityKind::kMemcpy;
        a.start_ns = Shift(m->start, offset_ns);
        a.end_ns = Shift(m->end, offset_ns);
        a.device = m->deviceId;
        a.stream = m->streamId;
        a.detail = CopyDirection(m->copyKind);
        a.bytes = m->bytes;
        sink(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        a.kind = ActivityKind::kMemset;
        a.start_ns = Shift(m->start, offset_ns);
        a.end_ns = Shift(m->end, offset_ns);
        a.device = m->deviceId;
        a.stream = m->streamId;
        a.bytes = m->bytes;
        sink(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        a.kind = ActivityKind::kSync;
        a.start_ns = Shift(s->start, offset_ns);
        a.end_ns = Shift(s->end, offset_ns);
        a.stream = s->streamId;
        a.detail = SyncType(s->type);
        sink(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
        const uint64_t at = Shift(m->timestamp, offset_ns);
        if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) {
          a.kind = ActivityKind::kNvtxMark;
          a.start_ns = a.end_ns = at;
          a.name = m->name != nullptr ? m->name : "";
          sink(a);
        } else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
          nvtx.Start(m->id, m->name != nullptr ? m->name : "", at);
        } else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
          if (auto range = nvtx.End(m->id)) {
            a.kind = ActivityKind::kNvtxRange;
            a.start_ns = range->second;
            a.end_ns = at;
            a.name = range->first;
            sink(a);
          }
        }
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace expanse::capture
