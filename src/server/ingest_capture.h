// The "capture_aggregates" section of an ingest batch (docs/formats/ingest-batch.md): the
// capture agent's per-process window aggregates (docs/formats/capture-spool.md), which each
// node's sampler read from its capture spool and checked.
#ifndef EXPANSE_SERVER_INGEST_CAPTURE_H_
#define EXPANSE_SERVER_INGEST_CAPTURE_H_

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "store/job_store.h"

namespace expanse::server {

// Appends one CaptureWindow per entry of `list` (a JSON array), stamped with compute_id; the
// entry is decoded by the wire's rules (wire/capture_records.h) and stored as its normal form.
// kInvalidArgument, reason "invalid_batch", naming the first offending field.
Status ParseCaptureAggregates(const nlohmann::json& list, std::string_view compute_id,
                              std::vector<store::CaptureWindow>* out);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_INGEST_CAPTURE_H_
