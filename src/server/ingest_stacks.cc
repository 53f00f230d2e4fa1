#include "server/ingest_stacks.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "server/validate.h"

namespace expanse::server {
namespace {

using nlohmann::json;

Status Bad(const std::string& path, std::string_view what) {
  return InvalidArgumentError("batch." + path + " " + std::string(what))
      .WithReason("invalid_batch");
}

// A validate.h refusal of `value` restated for `path`: its message is "<field> <problem>".
Status Restated(const std::string& path, const Status& status, std::string_view field) {
  if (status.ok())
    return status;
  return Bad(path, status.message().substr(field.size() + 1));
}

// A string member; absent or null is "" unless required.
Result<std::string> Text(const json& entry, const std::string& prefix, const char* key,
                         bool required) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) {
    if (required)
      return Bad(prefix + key, "is required");
    return std::string();
  }
  if (!it->is_string())
    return Bad(prefix + key, "must be a string");
  return it->get<std::string>();
}

// An integer member in [min, max]; always required.
Result<int64_t> Integer(const json& entry, const std::string& prefix, const char* key, int64_t min,
                        int64_t max) {
  auto it = entry.find(key);
  Status bad = Bad(prefix + key,
                   "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  if (it == entry.end() || !it->is_number_integer())
    return bad;
  // An unsigned value above INT64_MAX would wrap to a negative int64_t.
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return bad;
  }
  const int64_t value = it->get<int64_t>();
  if (value < min || value > max)
    return bad;
  return value;
}

Result<store::StackSample> ParseOne(const json& entry, const std::string& path,
                                    std::string_view compute_id) {
  if (!entry.is_object())
    return Bad(path, "must be an object");
  const std::string prefix = path + ".";
  store::StackSample s;
  s.compute_id = std::string(compute_id);
  EXPANSE_ASSIGN_OR_RETURN(s.job_id, Text(entry, prefix, "job_id", true));
  EXPANSE_RETURN_IF_ERROR(
      Restated(prefix + "job_id", ValidateText("job_id", s.job_id, 64), "job_id"));
  EXPANSE_ASSIGN_OR_RETURN(s.host, Text(entry, prefix, "host", true));
  EXPANSE_RETURN_IF_ERROR(Restated(prefix + "host", ValidateHostname("host", s.host), "host"));
  constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max();
  EXPANSE_ASSIGN_OR_RETURN(s.window_start_ms,
                           Integer(entry, prefix, "window_start_ms", 1, kMaxMs - 1));
  EXPANSE_ASSIGN_OR_RETURN(s.window_end_ms,
                           Integer(entry, prefix, "window_end_ms", s.window_start_ms + 1, kMaxMs));
  EXPANSE_ASSIGN_OR_RETURN(s.folded, Text(entry, prefix, "folded", true));
  EXPANSE_RETURN_IF_ERROR(Restated(
      prefix + "folded", ValidateText("folded", s.folded, store::kMaxFoldedStackBytes), "folded"));
  if (s.folded.front() == ';' || s.folded.back() == ';' ||
      s.folded.find(";;") != std::string::npos) {
    return Bad(prefix + "folded", "has an empty frame (frames are separated by one ';')");
  }
  EXPANSE_ASSIGN_OR_RETURN(s.thread_state, Text(entry, prefix, "thread_state", false));
  if (s.thread_state != "" && s.thread_state != "gil" && s.thread_state != "running" &&
      s.thread_state != "idle") {
    return Bad(prefix + "thread_state", "must be gil, running, idle or empty (unknown)");
  }
  EXPANSE_ASSIGN_OR_RETURN(s.count,
                           Integer(entry, prefix, "count", 1, store::kMaxStackSampleCount));
  if (auto it = entry.find("gpu_idle"); it != entry.end() && !it->is_null()) {
    if (!it->is_boolean())
      return Bad(prefix + "gpu_idle", "must be true or false");
    s.gpu_idle = it->get<bool>();
  }
  return s;
}

}  // namespace

Status ParseStacks(const json& list, std::string_view compute_id,
                   std::vector<store::StackSample>* out) {
  if (!list.is_array())
    return Bad("stacks", "must be an array");
  out->reserve(out->size() + list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(store::StackSample sample,
                             ParseOne(list[i], "stacks[" + std::to_string(i) + "]", compute_id));
    out->push_back(std::move(sample));
  }
  return OkStatus();
}

}  // namespace expanse::server
