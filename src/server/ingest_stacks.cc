#include "server/ingest_stacks.h"

#include <cstdint>
#include <string>
#include <utility>

#include "wire/records.h"

namespace expanse::server {
namespace {

using nlohmann::json;

Status BadStackField(const std::string& path, std::string_view what) {
  return InvalidArgumentError("batch." + path + " " + std::string(what))
      .WithReason("invalid_batch");
}

// The entry's rules are the wire record's (wire/records.h), shared with the controller.
Result<store::StackSample> ParseOne(const json& entry, const std::string& path,
                                    std::string_view compute_id) {
  static_assert(wire::kMaxFoldedStackBytes == store::kMaxFoldedStackBytes);
  static_assert(wire::kMaxStackSampleCount == store::kMaxStackSampleCount);
  EXPANSE_ASSIGN_OR_RETURN(wire::StackRecord r, wire::DecodeStack(entry, path, "invalid_batch"));
  store::StackSample s;
  s.compute_id = std::string(compute_id);
  s.job_id = std::move(r.job_id);
  s.host = std::move(r.host);
  s.window_start_ms = r.window_start_ms;
  s.window_end_ms = r.window_end_ms;
  s.folded = std::move(r.folded);
  s.thread_state = std::move(r.thread_state);
  s.count = r.count;
  s.gpu_idle = r.gpu_idle;
  return s;
}

}  // namespace

Status ParseStacks(const json& list, std::string_view compute_id,
                   std::vector<store::StackSample>* out) {
  if (!list.is_array())
    return BadStackField("stacks", "must be an array");
  out->reserve(out->size() + list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(
        store::StackSample sample,
        ParseOne(list[i], "batch.stacks[" + std::to_string(i) + "]", compute_id));
    out->push_back(std::move(sample));
  }
  return OkStatus();
}

}  // namespace expanse::server
