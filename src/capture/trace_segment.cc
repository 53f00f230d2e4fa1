#include "capture/trace_segment.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "capture/activity_window.h"

namespace expanse::capture {
namespace {

// Track ids inside the process: one per GPU stream, and two host tracks. Perfetto's JSON
// importer wants integer thread ids.
constexpr int64_t kSyncTrack = 1;
constexpr int64_t kNvtxTrack = 2;
int64_t StreamTrack(uint32_t device, uint32_t stream) {
  return 1000000 * (static_cast<int64_t>(device) + 1) + stream;
}

double Micros(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

const char* Category(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpy:
      return "memcpy";
    case ActivityKind::kMemset:
      return "memset";
    case ActivityKind::kSync:
      return "sync";
    case ActivityKind::kNvtxRange:
    case ActivityKind::kNvtxMark:
      return "nvtx";
  }
  return "other";
}

}  // namespace

void TraceSegment::Add(const Activity& a) {
  if (a.end_ns < start_ms_ * 1000000)
    return;  // finished before the window opened (a late buffer)
  if (events_.size() >= limits_.max_events) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{a.kind, a.start_ns, a.end_ns, a.device, a.stream, BoundedName(a.name),
                          std::string(a.detail), a.bytes, a.grid, a.block});
}

std::string TraceSegment::ToJson(uint64_t end_ms) const {
  const int64_t pid = process_.pid;
  nlohmann::json events = nlohmann::json::array();
  std::map<int64_t, std::string> tracks = {{kSyncTrack, "CUDA synchronisation (host)"},
                                           {kNvtxTrack, "NVTX"}};
  for (const Event& e : events_) {
    nlohmann::json ev = {{"cat", Category(e.kind)}, {"ts", Micros(e.start_ns)}, {"pid", pid}};
    nlohmann::json args = nlohmann::json::object();
    int64_t track = kSyncTrack;
    switch (e.kind) {
      case ActivityKind::kKernel:
        track = StreamTrack(e.device, e.stream);
        ev["name"] = e.name;
        args = {{"device", e.device}, {"stream", e.stream}, {"grid", e.grid}, {"block", e.block}};
        break;
      case ActivityKind::kMemcpy:
        track = StreamTrack(e.device, e.stream);
        ev["name"] = "memcpy " + e.detail;
        args = {{"device", e.device}, {"stream", e.stream}, {"bytes", e.bytes}};
        break;
      case ActivityKind::kMemset:
        track = StreamTrack(e.device, e.stream);
        ev["name"] = "memset";
        args = {{"device", e.device}, {"stream", e.stream}, {"bytes", e.bytes}};
        break;
      case ActivityKind::kSync:
        ev["name"] = "sync " + e.detail;
        args = {{"stream", e.stream}};
        break;
      case ActivityKind::kNvtxRange:
      case ActivityKind::kNvtxMark:
        track = kNvtxTrack;
        ev["name"] = e.name;
        break;
    }
    if (e.kind == ActivityKind::kNvtxMark) {
      ev["ph"] = "i";
      ev["s"] = "t";
    } else {
      ev["ph"] = "X";
      ev["dur"] = Micros(e.end_ns > e.start_ns ? e.end_ns - e.start_ns : 0);
    }
    ev["tid"] = track;
    if (!args.empty())
      ev["args"] = std::move(args);
    if (track >= 1000000 && tracks.count(track) == 0) {
      tracks[track] = "GPU " + std::to_string(e.device) + " stream " + std::to_string(e.stream);
    }
    events.push_back(std::move(ev));
  }
  nlohmann::json meta = nlohmann::json::array();
  std::string process_name = process_.host + " pid " + std::to_string(pid);
  if (!process_.rank.empty())
    process_name += " rank " + process_.rank;
  meta.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", process_name}}}});
  for (const auto& [track, name] : tracks) {
    meta.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", pid},
                    {"tid", track},
                    {"args", {{"name", name}}}});
  }
  for (auto& ev : events)
    meta.push_back(std::move(ev));
  nlohmann::json doc = {
      {"displayTimeUnit", "ms"},
      {"traceEvents", std::move(meta)},
      {"otherData",
       {{"format", kSegmentFormat},
        {"job_id", process_.job_id},
        {"step_id", process_.step_id},
        {"rank", process_.rank},
        {"host", process_.host},
        {"pid", pid},
        {"process_start_ticks", process_.start_ticks},
        {"uid", process_.uid},
        {"window_start_ms", start_ms_},
        {"window_end_ms", end_ms},
        {"trigger", {{"id", trigger_.id}, {"reason", trigger_.reason}, {"gpus", trigger_.gpus}}},
        {"events", events_.size()},
        {"dropped_events", dropped_},
        {"observed_ms",
         (end_ms > start_ms_ ? end_ms - start_ms_ : 0) -
             std::min(end_ms > start_ms_ ? end_ms - start_ms_ : 0, unobserved_ms_)}}}};
  if (pc_profile_.state() != PcSamplingState::kNotTried)
    doc["otherData"]["pc_sampling"] = pc_profile_.ToJson();
  // Replacement for invalid UTF-8 in a name: the segment must stay valid JSON whatever a kernel
  // or an NVTX range is called.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string TraceSegment::FileName() const {
  return "seg-" + process_.job_id + "-" + process_.host + "-" + std::to_string(process_.pid) + "-" +
         std::to_string(start_ms_) + ".json";
}

}  // namespace expanse::capture
