#include "wire/trace_segment_header.h"

#include <string>

#include "wire/field_reader.h"

namespace expanse::wire {

JsonLimits TraceSegmentJsonLimits() {
  JsonLimits limits;
  limits.max_values = 8'000'000;
  limits.max_string_bytes = 4096;
  limits.max_depth = 8;
  return limits;
}

Result<TraceSegmentHeader> DecodeTraceSegmentHeader(const nlohmann::json& doc,
                                                    std::string_view where,
                                                    std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader top,
                           FieldReader::Object(doc, std::string(where), std::string(reason)));
  const nlohmann::json* events = top.Find("traceEvents");
  if (events == nullptr || !events->is_array())
    return top.Bad("traceEvents", "must be an array");
  EXPANSE_ASSIGN_OR_RETURN(FieldReader other, top.Member("otherData", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const std::string format, other.Text("format", 64, Need::kRequired));
  if (format != kTraceSegmentFormat)
    return other.Bad("format", std::string("is not ") + kTraceSegmentFormat);
  TraceSegmentHeader h;
  EXPANSE_ASSIGN_OR_RETURN(h.job_id, other.Text("job_id", 64, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.host, other.Text("host", 253, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.pid, other.Int("pid", 1, int64_t{1} << 31, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.uid, other.Int("uid", 0, int64_t{1} << 32, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.window_start_ms,
                           other.Int("window_start_ms", 1, kMaxTimeMs - 1, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      h.window_end_ms, other.Int("window_end_ms", h.window_start_ms,
                                 h.window_start_ms + kMaxTraceSegmentWindowMs, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(FieldReader trigger, other.Member("trigger", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.trigger_id, trigger.Text("id", 128, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.trigger_reason,
                           trigger.Name("reason", 64, "_", false, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(h.events, other.Int("events", 0, int64_t{1} << 40, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(h.dropped_events,
                           other.Int("dropped_events", 0, int64_t{1} << 50, Need::kOptional));
  return h;
}

Result<TraceSegmentHeader> ParseTraceSegmentHeader(std::string_view text, std::string_view where,
                                                   std::string_view reason) {
  if (text.size() > kMaxTraceSegmentBytes) {
    return InvalidArgumentError(std::string(where) + " is " + std::to_string(text.size()) +
                                " bytes; a trace segment is at most " +
                                std::to_string(kMaxTraceSegmentBytes))
        .WithReason(std::string(reason));
  }
  Result<nlohmann::json> doc = ParseJson(text, TraceSegmentJsonLimits());
  if (!doc.ok())
    return InvalidArgumentError(std::string(where) + ": " + doc.status().message())
        .WithReason(std::string(reason));
  return DecodeTraceSegmentHeader(*doc, where, reason);
}

}  // namespace expanse::wire
