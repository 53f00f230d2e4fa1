// TraceSegment: Phase B of the capture agent. On an escalation trigger the agent keeps every
// activity of a bounded window (not just totals) and writes it as one trace segment, a file in
// the Chrome Trace Event format (JSON object form) that Perfetto and chrome://tracing open as it
// is: kernels, copies and memsets on one track per GPU stream, synchronisation on a host track,
// NVTX ranges and marks on their own track. Expanse's own facts about the segment (job, host,
// process, window, trigger, counts) sit in "otherData". docs/formats/trace-segment.md.
//
// Bounded: at most `max_events` events (later activities are counted as dropped) with names cut
// to kMaxNameBytes, so a segment stays within a few tens of megabytes.
#ifndef EXPANSE_CAPTURE_TRACE_SEGMENT_H_
#define EXPANSE_CAPTURE_TRACE_SEGMENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "capture/activity.h"
#include "capture/capture_trigger.h"
#include "capture/pc_profile.h"
#include "capture/process_identity.h"

namespace expanse::capture {

inline constexpr char kSegmentFormat[] = "expanse-trace-segment/1";

struct SegmentLimits {
  // About 35 MB of JSON at most (events of ~700 bytes with the longest names), within the
  // sampler's 64 MiB cap, and a few tens of MB of memory in the process while it is written.
  size_t max_events = 50000;
};

class TraceSegment {
 public:
  TraceSegment(ProcessIdentity process, CaptureTrigger trigger, uint64_t start_ms,
               SegmentLimits limits = {})
      : process_(std::move(process)),
        trigger_(std::move(trigger)),
        start_ms_(start_ms),
        limits_(limits) {}

  // Keeps the activity if it ended at or after the window's start and there is room.
  void Add(const Activity& activity);
  void AddDropped(uint64_t records) { dropped_ += records; }
  // CUPTI was off for `ms` of the window: the segment holds bursts (RecordBudget).
  void AddUnobserved(uint64_t ms) { unobserved_ms_ += ms; }

  // The window's PC sampling (cuda/pc_sampling.h), in otherData.pc_sampling once its state is
  // set.
  PcProfile& pc_profile() { return pc_profile_; }

  const CaptureTrigger& trigger() const { return trigger_; }
  size_t events() const { return events_.size(); }
  uint64_t dropped() const { return dropped_; }

  // The segment as Chrome Trace Event JSON, its window ending at `end_ms`.
  std::string ToJson(uint64_t end_ms) const;

  // The file name it is spooled under: seg-<job>-<host>-<pid>-<start ms>.json.
  std::string FileName() const;

 private:
  struct Event {
    ActivityKind kind;
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t device;
    uint32_t stream;
    std::string name;
    std::string detail;
    uint64_t bytes;
    std::array<int32_t, 3> grid;
    std::array<int32_t, 3> block;
  };

  ProcessIdentity process_;
  CaptureTrigger trigger_;
  uint64_t start_ms_;
  SegmentLimits limits_;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;
  uint64_t unobserved_ms_ = 0;
  PcProfile pc_profile_;
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_TRACE_SEGMENT_H_
