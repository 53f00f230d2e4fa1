// Decoding and validation of data-plane ingest batches (docs/formats/ingest-batch.md).
//
// A batch is untrusted input from a compute: it is decompressed with a hard output cap,
// parsed, and checked field by field before anything is stored, so a bad batch changes
// nothing and its sender learns exactly which field is wrong.
#ifndef EXPANSE_SERVER_INGEST_BATCH_H_
#define EXPANSE_SERVER_INGEST_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/job_store.h"
#include "tsdb/sample.h"

namespace expanse::server {

inline constexpr size_t kMaxIngestJsonBytes = 64u << 20;
inline constexpr size_t kMaxIngestSamples = 2'000'000;

struct IngestBatch {
  std::string stream;
  uint64_t sequence = 0;
  tsdb::Batch series;  // keys carry the compute id of the authenticated sender
  size_t samples = 0;
  std::vector<store::JobRecord> jobs;
  std::vector<store::JobNodeEvent> job_events;
  std::vector<store::GpuAllocation> gpu_allocations;
  std::vector<store::StackSample> stacks;
  std::vector<store::CaptureWindow> capture_windows;
  // How many job records the batch held once they are written and let go (data_routes.cc).
  size_t jobs_written = 0;

  // The idempotency key: compute, stream and sequence.
  std::string BatchId(std::string_view compute_id) const;
};

// Undoes the body's encoding: "application/zstd" is one zstd frame holding the JSON
// document; "application/json" is the document itself. kInvalidArgument with reason
// "truncated_body", "corrupt_body" or "unsupported_media_type" on a truncated or corrupt
// frame or an unknown type; with reason "body_too_large" (HTTP 413) when the document would
// exceed kMaxIngestJsonBytes or the frame needs a window over 8 MiB. Never holds more than
// the decoded document: its size is known (declared or counted) before it is kept.
Result<std::string> DecodeIngestBody(std::string_view content_type, std::string_view body);

// Parses and validates the JSON document; every record is stamped with compute_id.
// kInvalidArgument, reason "invalid_batch", naming the first offending field, e.g.
// `batch.series[3].v[7] must be a finite number`; or "invalid_json", "json_too_deep",
// "json_too_large" for a document outside kIngestJson (route_util.h).
Result<IngestBatch> ParseIngestBatch(std::string_view json, std::string_view compute_id);

// The single-pass parser ParseIngestBatch tries first, exposed for tests: the batch for a
// valid document of the common telemetry shape (no records, no escapes in strings),
// nullopt for anything else, valid or not, which is then left to the full parser.
std::optional<IngestBatch> ParseCommonIngestBatch(std::string_view json,
                                                  std::string_view compute_id);

// The full parser alone (nlohmann DOM), for the tests and the differential fuzzer
// (fuzz/fuzz_ingest_fast_path.cc) that hold the fast path to its results.
Result<IngestBatch> ParseIngestBatchWithoutFastPath(std::string_view json,
                                                    std::string_view compute_id);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_INGEST_BATCH_H_
