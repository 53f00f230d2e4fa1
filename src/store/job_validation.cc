#include "store/job_validation.h"

#include <string>
#include <utility>

#include "core/utf8.h"
#include "store/message_text.h"

namespace expanse::store::store_internal {
namespace {

Status Invalid(std::string_view where, const std::string& problem) {
  return InvalidArgumentError(std::string(where) + ": " + problem);
}

Status RequireNonEmpty(std::string_view where, std::string_view field, std::string_view value) {
  if (value.empty()) {
    return Invalid(where, std::string(field) + " is empty");
  }
  return OkStatus();
}

Status RequireNotNegative(std::string_view where, std::string_view field, int64_t value) {
  if (value < 0) {
    return Invalid(
        where, std::string(field) + " is " + std::to_string(value) + "; it must not be negative");
  }
  return OkStatus();
}

}  // namespace

Status ValidateJobKey(std::string_view where, std::string_view compute_id,
                      std::string_view job_id) {
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "compute_id", compute_id));
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "job_id", job_id));
  if (job_id.size() > kMaxJobIdBytes) {
    return Invalid(where, "job_id " + QuoteForMessage(job_id) + " is " +
                              std::to_string(job_id.size()) + " bytes; at most " +
                              std::to_string(kMaxJobIdBytes) + " are allowed");
  }
  return OkStatus();
}

Status ValidateJobRecord(std::string_view where, const JobRecord& job) {
  EXPANSE_RETURN_IF_ERROR(ValidateJobKey(where, job.compute_id, job.job_id));
  const std::pair<std::string_view, int64_t> numbers[] = {
      {"submit_ms", job.submit_ms},     {"start_ms", job.start_ms},
      {"end_ms", job.end_ms},           {"req_nodes", job.req_nodes},
      {"req_cpus", job.req_cpus},       {"req_gpus", job.req_gpus},
      {"req_mem_mib", job.req_mem_mib}, {"time_limit_s", job.time_limit_s},
      {"observed_ms", job.observed_ms},
  };
  for (const auto& [field, value] : numbers) {
    EXPANSE_RETURN_IF_ERROR(RequireNotNegative(where, field, value));
  }
  if (job.start_ms != 0 && job.end_ms != 0 && job.end_ms < job.start_ms) {
    return Invalid(where, "end_ms (" + FormatUtcMillis(job.end_ms) + ") is before start_ms (" +
                              FormatUtcMillis(job.start_ms) + ")");
  }
  return OkStatus();
}

Status ValidateJobNodeEvent(std::string_view where, const JobNodeEvent& event) {
  EXPANSE_RETURN_IF_ERROR(ValidateJobKey(where, event.compute_id, event.job_id));
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "host", event.host));
  if (event.kind != "start" && event.kind != "end") {
    return Invalid(where, "kind " + QuoteForMessage(event.kind) + " is not \"start\" or \"end\"");
  }
  if (event.at_ms <= 0) {
    return Invalid(where, "at_ms is " + std::to_string(event.at_ms) + "; it must be positive");
  }
  return OkStatus();
}

Status ValidateGpuAllocation(std::string_view where, const GpuAllocation& allocation) {
  EXPANSE_RETURN_IF_ERROR(ValidateJobKey(where, allocation.compute_id, allocation.job_id));
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "host", allocation.host));
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "gpu_uuid", allocation.gpu_uuid));
  if (allocation.gpu_index < -1) {
    return Invalid(where, "gpu_index is " + std::to_string(allocation.gpu_index) +
                              "; it must be -1 (unknown) or more");
  }
  if (allocation.gpu_minor < -1) {
    return Invalid(where, "gpu_minor is " + std::to_string(allocation.gpu_minor) +
                              "; it must be -1 (unknown) or more");
  }
  if (allocation.from_ms <= 0) {
    return Invalid(where,
                   "from_ms is " + std::to_string(allocation.from_ms) + "; it must be positive");
  }
  if (allocation.to_ms != 0 && allocation.to_ms < allocation.from_ms) {
    return Invalid(where, "to_ms (" + FormatUtcMillis(allocation.to_ms) + ") is before from_ms (" +
                              FormatUtcMillis(allocation.from_ms) + ")");
  }
  return OkStatus();
}

Status ValidateStackSample(std::string_view where, const StackSample& sample) {
  EXPANSE_RETURN_IF_ERROR(ValidateJobKey(where, sample.compute_id, sample.job_id));
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "host", sample.host));
  if (sample.window_start_ms <= 0) {
    return Invalid(where, "window_start_ms is " + std::to_string(sample.window_start_ms) +
                              "; it must be positive");
  }
  if (sample.window_end_ms <= sample.window_start_ms) {
    return Invalid(where, "window_end_ms (" + FormatUtcMillis(sample.window_end_ms) +
                              ") must be after window_start_ms (" +
                              FormatUtcMillis(sample.window_start_ms) + ")");
  }
  if (sample.count <= 0 || sample.count > kMaxStackSampleCount) {
    return Invalid(where, "count is " + std::to_string(sample.count) + "; it must be 1 to " +
                              std::to_string(kMaxStackSampleCount));
  }
  if (sample.thread_state != "" && sample.thread_state != "gil" &&
      sample.thread_state != "running" && sample.thread_state != "idle") {
    return Invalid(where, "thread_state " + QuoteForMessage(sample.thread_state) +
                              " is not \"gil\", \"running\", \"idle\" or \"\" (unknown)");
  }
  const std::string_view folded = sample.folded;
  EXPANSE_RETURN_IF_ERROR(RequireNonEmpty(where, "folded", folded));
  if (folded.size() > kMaxFoldedStackBytes) {
    return Invalid(where, "folded is " + std::to_string(folded.size()) + " bytes; at most " +
                              std::to_string(kMaxFoldedStackBytes) + " are allowed");
  }
  if (!IsValidUtf8(folded)) {
    return Invalid(where, "folded is not valid UTF-8");
  }
  for (const unsigned char c : folded) {
    if (c < 0x20 || c == 0x7f) {
      return Invalid(where, "folded contains a control character");
    }
  }
  // Frames are separated by ';'; an empty one means the daemon folded the stack wrongly, and
  // would show as a nameless frame.
  if (folded.front() == ';' || folded.back() == ';' || folded.find(";;") != std::string::npos) {
    return Invalid(where, "folded has an empty frame: " + QuoteForMessage(folded));
  }
  return OkStatus();
}

Status ValidateTimeRange(std::string_view where, int64_t from_ms, int64_t to_ms) {
  EXPANSE_RETURN_IF_ERROR(RequireNotNegative(where, "from_ms", from_ms));
  EXPANSE_RETURN_IF_ERROR(RequireNotNegative(where, "to_ms", to_ms));
  if (from_ms != 0 && to_ms != 0 && to_ms <= from_ms) {
    return Invalid(where, "to_ms (" + FormatUtcMillis(to_ms) + ") must be after from_ms (" +
                              FormatUtcMillis(from_ms) + ")");
  }
  return OkStatus();
}

Status ValidateJobFilter(const JobFilter& filter) {
  constexpr std::string_view kWhere = "job filter";
  if (filter.compute_ids.empty()) {
    return Invalid(kWhere, "compute_ids is empty; name at least one compute");
  }
  if (filter.compute_ids.size() > kMaxJobFilterValues ||
      filter.states.size() > kMaxJobFilterValues) {
    return Invalid(kWhere, "compute_ids and states may hold at most " +
                               std::to_string(kMaxJobFilterValues) + " values each");
  }
  for (std::size_t i = 0; i < filter.compute_ids.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        RequireNonEmpty(kWhere, "compute_ids[" + std::to_string(i) + "]", filter.compute_ids[i]));
  }
  for (std::size_t i = 0; i < filter.states.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        RequireNonEmpty(kWhere, "states[" + std::to_string(i) + "]", filter.states[i]));
  }
  EXPANSE_RETURN_IF_ERROR(ValidateTimeRange(kWhere, filter.from_ms, filter.to_ms));
  if (filter.limit < 1 || filter.limit > kMaxJobListLimit) {
    return Invalid(kWhere, "limit is " + std::to_string(filter.limit) +
                               "; it must be between 1 and " + std::to_string(kMaxJobListLimit));
  }
  return RequireNotNegative(kWhere, "offset", filter.offset);
}

}  // namespace expanse::store::store_internal
