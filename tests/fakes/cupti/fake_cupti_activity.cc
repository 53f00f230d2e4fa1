// The Activity API half of the fake libcupti.so.13: what the in-process capture agent
// (libexpanse-agent.so) subscribes to. The "GPU" runs the scenario's `activity.loop` again and
// again, one iteration every `loop_ms` from the first cuptiActivityEnable; each flush hands the
// caller the records of the iterations that started since the previous flush, for the kinds it
// enabled, in the real record layouts (NVIDIA's headers), through the caller's own buffer
// callbacks, as the real library does. README.md ("Activity API") has the details.

#include "fake_cupti_activity.h"

#include <cupti_activity.h>
#include <cupti_result.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_cupti_scenario.h"

namespace {

using expanse_fake_cupti::ActivityItem;
using expanse_fake_cupti::Call;
using expanse_fake_cupti::CuptiNowNs;

// Under the Call lock.
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
std::set<int> g_enabled;
uint64_t g_origin_ns = 0;  // the first iteration's start
uint64_t g_next_iteration = 0;
uint64_t g_dropped = 0;  // not yet reported by cuptiActivityGetNumDroppedRecords
uint32_t g_marker_id = 0;
// Records of iterations that ran while their kinds were enabled and were not flushed yet: made
// when a kind is disabled (the real library keeps what it recorded until a flush).
std::vector<uint8_t> g_pending;
uint64_t g_pending_records = 0;
std::set<std::string>* g_names = nullptr;  // interned names; records point into it for ever

constexpr uint64_t kMaxRecordsPerFlush = 100000;

const char* Intern(const std::string& name) {
  if (g_names == nullptr)
    g_names = new std::set<std::string>();
  return g_names->insert(name).first->c_str();
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return sizeof(CUpti_ActivityMarker2);
    default:
      return 0;
  }
}

uint8_t CopyKind(const std::string& direction) {
  if (direction == "htod")
    return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  if (direction == "dtoh")
    return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  if (direction == "dtod")
    return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  if (direction == "htoh")
    return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
  if (direction == "ptop")
    return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
}

CUpti_ActivitySynchronizationType SyncType(const std::string& type) {
  if (type == "device")
    return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  if (type == "stream")
    return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  if (type == "event")
    return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  if (type == "stream_wait_event")
    return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
}

template <typename Record>
void Append(std::vector<uint8_t>& out, const Record& record) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&record);
  out.insert(out.end(), bytes, bytes + sizeof record);
}

// The records one loop item makes when it starts at `start` (CUPTI clock), for the enabled kinds.
void ItemRecords(const ActivityItem& item, uint64_t start, std::vector<uint8_t>& out,
                 uint64_t* records) {
  const uint64_t end = start + item.duration_ns;
  if (item.kind == "kernel" && (g_enabled.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
                                g_enabled.count(CUPTI_ACTIVITY_KIND_KERNEL))) {
    CUpti_ActivityKernel10 k{};
    k.kind = g_enabled.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                 ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                 : CUPTI_ACTIVITY_KIND_KERNEL;
    k.start = start;
    k.end = end;
    k.deviceId = item.device;
    k.streamId = item.stream;
    k.gridX = item.grid[0];
    k.gridY = item.grid[1];
    k.gridZ = item.grid[2];
    k.blockX = item.block[0];
    k.blockY = item.block[1];
    k.blockZ = item.block[2];
    k.name = Intern(item.name);
    Append(out, k);
    ++*records;
  } else if (item.kind == "memcpy" && g_enabled.count(CUPTI_ACTIVITY_KIND_MEMCPY)) {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CopyKind(item.detail);
    m.bytes = item.bytes;
    m.start = start;
    m.end = end;
    m.deviceId = item.device;
    m.streamId = item.stream;
    Append(out, m);
    ++*records;
  } else if (item.kind == "memset" && g_enabled.count(CUPTI_ACTIVITY_KIND_MEMSET)) {
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = item.bytes;
    m.start = start;
    m.end = end;
    m.deviceId = item.device;
    m.streamId = item.stream;
    Append(out, m);
    ++*records;
  } else if (item.kind == "sync" && g_enabled.count(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    CUpti_ActivitySynchronization2 s{};
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = SyncType(item.detail);
    s.start = start;
    s.end = end;
    s.streamId = item.stream;
    Append(out, s);
    ++*records;
  } else if ((item.kind == "nvtx_range" || item.kind == "nvtx_mark") &&
             g_enabled.count(CUPTI_ACTIVITY_KIND_MARKER)) {
    CUpti_ActivityMarker2 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.id = ++g_marker_id;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.name = Intern(item.name);
    m.domain = nullptr;
    m.timestamp = start;
    if (item.kind == "nvtx_mark") {
      m.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
      Append(out, m);
      ++*records;
    } else {
      m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
      Append(out, m);
      m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
      m.name = nullptr;
      m.timestamp = end;
      Append(out, m);
      *records += 2;
    }
  }
}

// Makes the records of every iteration that started before `now` and has not been recorded yet,
// for the kinds enabled now, into g_pending (at most kMaxRecordsPerFlush; beyond, dropped).
void Materialize(const expanse_fake_cupti::ActivityScenario& activity, uint64_t now) {
  if (g_enabled.empty())
    return;
  while (!activity.loop.empty() && g_origin_ns + g_next_iteration * activity.loop_ns < now) {
    uint64_t at = g_origin_ns + g_next_iteration * activity.loop_ns;
    ++g_next_iteration;
    if (g_pending_records >= kMaxRecordsPerFlush) {
      g_dropped += activity.loop.size();
      continue;
    }
    for (const ActivityItem& item : activity.loop) {
      ItemRecords(item, at, g_pending, &g_pending_records);
      at += item.duration_ns;
    }
  }
}

// Hands `records` to the agent's buffers, as cuptiActivityFlushAll does.
void Deliver(const std::vector<uint8_t>& records, CUpti_BuffersCallbackRequestFunc request,
             CUpti_BuffersCallbackCompleteFunc complete) {
  size_t offset = 0;
  while (offset < records.size()) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer == nullptr || size == 0) {
      Call call("cuptiActivityFlushAll.drop");
      for (size_t o = offset; o < records.size();) {
        const auto* r = reinterpret_cast<const CUpti_Activity*>(records.data() + o);
        o += RecordSize(r->kind);
        ++g_dropped;
      }
      break;
    }
    size_t valid = 0;
    while (offset < records.size()) {
      const auto* r = reinterpret_cast<const CUpti_Activity*>(records.data() + offset);
      const size_t n = RecordSize(r->kind);
      if (valid + n > size)
        break;
      std::memcpy(buffer + valid, records.data() + offset, n);
      valid += n;
      offset += n;
    }
    complete(nullptr, 0, buffer, size, valid);
    if (valid == 0)
      break;  // a buffer too small for one record
  }
}

}  // namespace

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  Call call("cuptiGetTimestamp");
  if (timestamp == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  *timestamp = CuptiNowNs();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  Call call("cuptiActivityRegisterCallbacks");
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (const int error = call.scenario().activity.register_error; error != 0)
    return call.Return(static_cast<CUptiResult>(error));
  g_request = funcBufferRequested;
  g_complete = funcBufferCompleted;
  expanse_fake_cupti::g_attached = true;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  Call call("cuptiActivityEnable");
  call.AddDetail("kind=" + std::to_string(static_cast<int>(kind)));
  const auto& errors = call.scenario().activity.enable_errors;
  if (auto it = errors.find(static_cast<int>(kind)); it != errors.end() && it->second != 0)
    return call.Return(static_cast<CUptiResult>(it->second));
  if (RecordSize(kind) == 0)
    return call.Return(CUPTI_ERROR_NOT_COMPATIBLE);
  if (g_enabled.empty()) {
    g_origin_ns = CuptiNowNs();
    g_next_iteration = 0;
  }
  g_enabled.insert(static_cast<int>(kind));
  expanse_fake_cupti::g_attached = true;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  Call call("cuptiActivityDisable");
  call.AddDetail("kind=" + std::to_string(static_cast<int>(kind)));
  // What ran while the kind was on is recorded already; the next flush delivers it.
  Materialize(call.scenario().activity, CuptiNowNs());
  g_enabled.erase(static_cast<int>(kind));
  return call.Return(CUPTI_SUCCESS);
}

// Completes buffers as CUPTI does: a periodic flush (flag 0) on a thread of the library's own,
// which the real one uses for buffers it completes by itself, and a forced flush on the
// caller's. So an agent that assumes its callbacks run on the thread that flushed fails its
// tests. The records are made under the lock and handed to the callbacks after it is released,
// since the callbacks call back into this library.
FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  std::vector<uint8_t> records;
  uint64_t count = 0;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  {
    Call call("cuptiActivityFlushAll");
    if (flag != 0)
      call.AddDetail("flag=" + std::to_string(flag));
    if (g_request == nullptr)
      return call.Return(CUPTI_SUCCESS);
    const auto& activity = call.scenario().activity;
    Materialize(activity, CuptiNowNs());
    if (g_pending.empty())
      return call.Return(CUPTI_SUCCESS);
    records.swap(g_pending);
    count = g_pending_records;
    g_pending_records = 0;
    g_dropped += activity.dropped_per_flush;
    call.AddDetail("records=" + std::to_string(count));
    request = g_request;
    complete = g_complete;
  }
  const auto deliver = [&] {
    // Fill as many of the caller's buffers as the records need; a buffer the caller does not
    // give drops the rest, as CUPTI does.
    Deliver(records, request, complete);
  };
  if (flag == 0) {
    std::thread cupti_thread(deliver);
    cupti_thread.join();
  } else {
    deliver();
  }
  return CUPTI_SUCCESS;
}

// Not traced (it is called once per record) and lock-free: it reads only the caller's buffer.
FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer,
                                                            size_t validBufferSizeBytes,
                                                            CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr)
    return CUPTI_ERROR_INVALID_PARAMETER;
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
    const size_t n = RecordSize((*record)->kind);
    if (n == 0)
      return CUPTI_ERROR_INVALID_KIND;
    offset += n;
  }
  if (offset + sizeof(CUpti_Activity) > validBufferSizeBytes)
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  const size_t n = RecordSize(next->kind);
  if (n == 0 || offset + n > validBufferSizeBytes)
    return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t,
                                                                   size_t* dropped) {
  Call call("cuptiActivityGetNumDroppedRecords");
  if (dropped == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  *dropped = g_dropped;
  g_dropped = 0;
  call.AddDetail("dropped=" + std::to_string(*dropped));
  return call.Return(CUPTI_SUCCESS);
}

}  // extern "C"

namespace expanse_fake_cupti {

uint64_t FinalizeActivity(const ActivityScenario& activity) {
  Materialize(activity, CuptiNowNs());
  const uint64_t lost = g_pending_records;
  g_pending.clear();
  g_pending_records = 0;
  g_enabled.clear();
  g_request = nullptr;
  g_complete = nullptr;
  return lost;
}

}  // namespace expanse_fake_cupti
