// The "stacks" section of an ingest batch (docs/formats/ingest-batch.md): Python stacks of job
// processes, folded and counted by the daemon per aggregation window.
#ifndef EXPANSE_SERVER_INGEST_STACKS_H_
#define EXPANSE_SERVER_INGEST_STACKS_H_

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "store/job_store.h"

namespace expanse::server {

// Appends one StackSample per entry of `list` (a JSON array), stamped with compute_id. Checks
// every field as the store will, so that a batch the parser accepts is one the store takes:
// kInvalidArgument, reason "invalid_batch", naming the first offending field, e.g.
// `batch.stacks[2].count must be an integer from 1 to 1000000000`. On error `out` may hold
// the entries before the bad one.
Status ParseStacks(const nlohmann::json& list, std::string_view compute_id,
                   std::vector<store::StackSample>* out);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_INGEST_STACKS_H_
