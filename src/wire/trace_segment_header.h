// The header of a capture agent's trace segment (docs/formats/capture-spool.md, "Trace
// segments"): the Chrome trace document's "otherData", which says whose window of CUDA activity
// the segment holds. The sampler reads it from the node-local spool (written by a job's user),
// the controller from the shared spool and the server from the network: hostile input each
// time, parsed with the same bounded JSON parser and decoded here.
#ifndef EXPANSE_WIRE_TRACE_SEGMENT_HEADER_H_
#define EXPANSE_WIRE_TRACE_SEGMENT_HEADER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "wire/json_parse.h"

namespace expanse::wire {

inline constexpr char kTraceSegmentFormat[] = "expanse-trace-segment/1";
// A segment is at most this many bytes (the agent writes at most about 35 MB).
inline constexpr size_t kMaxTraceSegmentBytes = size_t{64} << 20;
// A Phase B window is at most this long.
inline constexpr int64_t kMaxTraceSegmentWindowMs = 600'000;

struct TraceSegmentHeader {
  std::string job_id;
  std::string host;
  int64_t pid = 0;
  int64_t uid = 0;  // the account the agent ran as (the job's user)
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;  // at least the start, at most kMaxTraceSegmentWindowMs later
  std::string trigger_id;
  std::string trigger_reason;  // "" when the segment names none
  int64_t events = 0;
  int64_t dropped_events = 0;
  // otherData.pc_sampling in brief, as compact JSON of at most kMaxPcSamplingSummaryBytes, or
  // "" when the segment has none: {"state", "reason"} for a window that did not sample, else
  // {"state": "sampled", "total_samples", "dropped_samples", "stall_reasons": [[name, samples]
  // … the five largest], "functions": [{"name", "samples", "stall": its largest reason} … the
  // first five]}. Names are cut to kMaxPcSamplingNameBytes.
  std::string pc_sampling;
};
inline constexpr size_t kMaxPcSamplingSummaryBytes = 4096;
inline constexpr size_t kMaxPcSamplingNameBytes = 160;

// The limits a whole segment is parsed within: deep enough for its events, strings no longer
// than the agent writes, a bounded number of values.
JsonLimits TraceSegmentJsonLimits();

// Decodes the header of a parsed segment: `traceEvents` must be an array and `otherData` hold
// this format, `job_id`, `host`, `pid`, `uid`, the window and `trigger.id`; a `pc_sampling`
// there must have the agent's shape (docs/formats/capture-spool.md). Errors are
// kInvalidArgument naming the field, with `reason`; `where` names the segment in messages.
Result<TraceSegmentHeader> DecodeTraceSegmentHeader(const nlohmann::json& doc,
                                                    std::string_view where,
                                                    std::string_view reason);

// ParseJson within TraceSegmentJsonLimits, then DecodeTraceSegmentHeader; a text over
// kMaxTraceSegmentBytes is refused before it is parsed.
Result<TraceSegmentHeader> ParseTraceSegmentHeader(std::string_view text, std::string_view where,
                                                   std::string_view reason);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_TRACE_SEGMENT_HEADER_H_
