// The always-on aggregate file: one JSON document per process and window that had any CUDA
// activity, spooled as agg-<job>-<host>-<pid>-<window end ms>.json. docs/formats/trace-segment.md
// ("Aggregates") describes every field; the sampler reads them as hostile input.
#ifndef EXPANSE_CAPTURE_AGGREGATE_JSON_H_
#define EXPANSE_CAPTURE_AGGREGATE_JSON_H_

#include <string>

#include "capture/activity_window.h"
#include "capture/process_identity.h"

namespace expanse::capture {

inline constexpr char kAggregateFormat[] = "expanse-capture-aggregate/1";

std::string AggregateJson(const ProcessIdentity& process, const WindowSummary& window);
std::string AggregateFileName(const ProcessIdentity& process, const WindowSummary& window);

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_AGGREGATE_JSON_H_
