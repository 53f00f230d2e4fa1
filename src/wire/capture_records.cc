#include "wire/capture_records.h"

#include <algorithm>
#include <array>

#include "wire/field_reader.h"

namespace expanse::wire {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 6> kDirections = {"htod", "dtoh", "dtod",
                                                    "htoh", "ptop", "other"};
constexpr std::array<const char*, 5> kSyncTypes = {"device", "stream", "event", "stream_wait_event",
                                                   "other"};

Result<CaptureTotal> DecodeTotal(const FieldReader& r, const char* ns_key, bool bytes, bool named) {
  CaptureTotal t;
  if (named) {
    EXPANSE_ASSIGN_OR_RETURN(t.name, r.Text("name", kMaxCaptureNameBytes, Need::kOptional));
  }
  EXPANSE_ASSIGN_OR_RETURN(t.count, r.Int("count", 0, kMaxCaptureCount, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(t.ns, r.Int(ns_key, 0, kMaxCaptureCount * 1000, Need::kRequired));
  if (bytes) {
    EXPANSE_ASSIGN_OR_RETURN(t.bytes, r.Int("bytes", 0, kMaxCaptureCount * 1000, Need::kRequired));
  }
  return t;
}

Result<std::vector<CaptureTotal>> DecodeList(const FieldReader& parent, const char* key,
                                             const char* ns_key) {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<FieldReader> entries,
                           parent.Objects(key, kMaxCaptureTopEntries, Need::kOptional));
  std::vector<CaptureTotal> out;
  for (const FieldReader& e : entries) {
    EXPANSE_ASSIGN_OR_RETURN(CaptureTotal t, DecodeTotal(e, ns_key, false, true));
    out.push_back(std::move(t));
  }
  return out;
}

// An object keyed by a fixed vocabulary ("memcpy" by direction, "sync" by type); keys outside
// it (a newer agent's) are passed over.
template <size_t N>
Result<std::vector<CaptureTotal>> DecodeKeyed(const FieldReader& parent, const char* key,
                                              const std::array<const char*, N>& names,
                                              const char* ns_key, bool bytes) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader section, parent.Member(key, Need::kOptional));
  std::vector<CaptureTotal> out;
  for (const char* name : names) {
    if (section.Find(name) == nullptr)
      continue;
    EXPANSE_ASSIGN_OR_RETURN(FieldReader entry, section.Member(name, Need::kRequired));
    EXPANSE_ASSIGN_OR_RETURN(CaptureTotal t, DecodeTotal(entry, ns_key, bytes, false));
    t.name = name;
    out.push_back(std::move(t));
  }
  return out;
}

json Total(const CaptureTotal& t, const char* ns_key, bool bytes, bool named) {
  json j = {{"count", t.count}, {ns_key, t.ns}};
  if (bytes)
    j["bytes"] = t.bytes;
  if (named)
    j["name"] = t.name;
  return j;
}

}  // namespace

Result<CaptureAggregateRecord> DecodeCaptureAggregate(const json& value, const std::string& path,
                                                      std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  CaptureAggregateRecord a;
  EXPANSE_ASSIGN_OR_RETURN(std::string format, r.Text("format", 64, Need::kRequired));
  if (format != kCaptureAggregateFormat)
    return r.Bad("format", "is not " + std::string(kCaptureAggregateFormat));
  EXPANSE_ASSIGN_OR_RETURN(a.job_id, r.Name("job_id", 64, "_+", false, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.step_id, r.Name("step_id", 32, "_", false, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(a.rank, r.Name("rank", 16, "", false, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(a.host, r.Name("host", 253, kHostChars, true, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.pid, r.Int("pid", 1, int64_t{1} << 31, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.uid, r.Int("uid", 0, int64_t{1} << 32, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.window_start_ms,
                           r.Int("window_start_ms", 1, kMaxTimeMs - 1, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      a.window_end_ms,
      r.Int("window_end_ms", a.window_start_ms + 1,
            std::min(kMaxTimeMs, a.window_start_ms + kMaxCaptureWindowMs), Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const json* devices, r.Array("devices", 64, Need::kOptional));
  for (size_t i = 0; devices != nullptr && i < devices->size(); ++i) {
    int64_t device = 0;
    if (!IntegerIn((*devices)[i], 0, 63, &device))
      return BadField(r.ElementPath("devices", i), "must be an integer 0..63", reason);
    a.devices.push_back(device);
  }
  EXPANSE_ASSIGN_OR_RETURN(FieldReader kernels, r.Member("kernels", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.kernel_count,
                           kernels.Int("count", 0, kMaxCaptureCount, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.kernel_ns,
                           kernels.Int("gpu_ns", 0, kMaxCaptureCount * 1000, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.top_kernels, DecodeList(kernels, "top", "gpu_ns"));
  EXPANSE_ASSIGN_OR_RETURN(FieldReader other, kernels.Member("other", Need::kOptional));
  if (other.Find("count") != nullptr) {
    EXPANSE_ASSIGN_OR_RETURN(a.other_kernels, DecodeTotal(other, "gpu_ns", false, false));
  }
  int64_t counted = a.other_kernels.count;
  for (const CaptureTotal& k : a.top_kernels)
    counted += k.count;
  if (counted > a.kernel_count)
    return kernels.Bad("count", "is less than the kernels it lists");
  EXPANSE_ASSIGN_OR_RETURN(a.memcpy, DecodeKeyed(r, "memcpy", kDirections, "gpu_ns", true));
  EXPANSE_ASSIGN_OR_RETURN(FieldReader memset, r.Member("memset", Need::kOptional));
  if (memset.Find("count") != nullptr) {
    EXPANSE_ASSIGN_OR_RETURN(a.memset, DecodeTotal(memset, "gpu_ns", true, false));
  }
  EXPANSE_ASSIGN_OR_RETURN(a.sync, DecodeKeyed(r, "sync", kSyncTypes, "wall_ns", false));
  EXPANSE_ASSIGN_OR_RETURN(FieldReader nvtx, r.Member("nvtx", Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(a.nvtx_ranges, DecodeList(nvtx, "ranges", "wall_ns"));
  EXPANSE_ASSIGN_OR_RETURN(a.nvtx_marks, nvtx.Int("marks", 0, kMaxCaptureCount, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(a.dropped_records,
                           r.Int("dropped_records", 0, kMaxCaptureCount, Need::kOptional));
  return a;
}

json Encode(const CaptureAggregateRecord& a) {
  json top = json::array();
  for (const CaptureTotal& k : a.top_kernels)
    top.push_back(Total(k, "gpu_ns", false, true));
  json memcpy = json::object();
  for (const CaptureTotal& c : a.memcpy)
    memcpy[c.name] = Total(c, "gpu_ns", true, false);
  json sync = json::object();
  for (const CaptureTotal& s : a.sync)
    sync[s.name] = Total(s, "wall_ns", false, false);
  json ranges = json::array();
  for (const CaptureTotal& n : a.nvtx_ranges)
    ranges.push_back(Total(n, "wall_ns", false, true));
  return {{"format", kCaptureAggregateFormat},
          {"job_id", a.job_id},
          {"step_id", a.step_id},
          {"rank", a.rank},
          {"host", a.host},
          {"pid", a.pid},
          {"uid", a.uid},
          {"window_start_ms", a.window_start_ms},
          {"window_end_ms", a.window_end_ms},
          {"devices", a.devices},
          {"kernels",
           {{"count", a.kernel_count},
            {"gpu_ns", a.kernel_ns},
            {"top", std::move(top)},
            {"other", Total(a.other_kernels, "gpu_ns", false, false)}}},
          {"memcpy", std::move(memcpy)},
          {"memset", Total(a.memset, "gpu_ns", true, false)},
          {"sync", std::move(sync)},
          {"nvtx", {{"ranges", std::move(ranges)}, {"marks", a.nvtx_marks}}},
          {"dropped_records", a.dropped_records}};
}

}  // namespace expanse::wire
