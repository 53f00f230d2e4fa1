// The records a worker's sampler hands the controller through the spool and the controller
// uploads in an ingest batch (docs/formats/ingest-batch.md), defined once with their decoder
// and encoder, so the controller refuses exactly what the server would: a record the
// controller passes on can never make the server refuse the batch it travels in.
//
// Decoders never throw. A refusal is kInvalidArgument naming the field by its path
// ("<path>.t0 must be an integer from 0 to ...") with the caller's reason.
#ifndef EXPANSE_WIRE_RECORDS_H_
#define EXPANSE_WIRE_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::wire {

inline constexpr int64_t kMaxSampleGapMs = 86'400'000;  // dt: at most a day between samples
inline constexpr size_t kMaxSeriesSamples = 2'000'000;  // also the whole batch's limit
// What one ingest batch may hold: series, and entries of each other section.
inline constexpr size_t kMaxBatchSeries = 200'000;
inline constexpr size_t kMaxBatchRecords = 100'000;
inline constexpr size_t kMaxFoldedStackBytes = 16 * 1024;
inline constexpr int64_t kMaxStackSampleCount = 1'000'000'000;

// One series' samples: t0 the first timestamp, dt[i] the offset of sample i from the one
// before (dt[0] from t0), v[i] its finite value.
struct SeriesRecord {
  std::string host;    // [A-Za-z0-9._-], 1..253
  std::string device;  // "" (host level), a GPU UUID or job/<id>: [A-Za-z0-9._:/+-], <= 96
  std::string metric;  // [a-z0-9._], 1..64
  int64_t t0 = 0;
  std::vector<int64_t> dt;
  std::vector<double> v;
};

struct JobEventRecord {
  std::string job_id;  // clean text, 1..64
  std::string host;    // clean text, 1..253
  std::string kind;    // "start" or "end"
  int64_t at_ms = 0;   // >= 1
};

struct GpuAllocationRecord {
  std::string job_id;    // clean text, 1..64
  std::string host;      // clean text, 1..253
  std::string gpu_uuid;  // clean text, 1..96
  int64_t gpu_index = -1;
  int64_t gpu_minor = -1;
  int64_t from_ms = 0;  // >= 1
  int64_t to_ms = 0;    // 0 while open, else >= from_ms
  // SLURM's number for the job on its node, for the node's own attribution; 0 when unknown.
  // The server ignores it.
  int64_t slurm_job_id = 0;
};

struct StackRecord {
  std::string job_id;  // clean text, 1..64
  std::string host;    // [A-Za-z0-9._-], 1..253
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;  // > window_start_ms
  std::string folded;         // frames joined by ';', none empty, 1..kMaxFoldedStackBytes
  std::string thread_state;   // "", "gil", "running" or "idle"
  int64_t count = 0;          // 1..kMaxStackSampleCount
  bool gpu_idle = false;
};

Result<SeriesRecord> DecodeSeries(const nlohmann::json& value, const std::string& path,
                                  std::string_view reason);
Result<JobEventRecord> DecodeJobEvent(const nlohmann::json& value, const std::string& path,
                                      std::string_view reason);
Result<GpuAllocationRecord> DecodeGpuAllocation(const nlohmann::json& value,
                                                const std::string& path, std::string_view reason);
Result<StackRecord> DecodeStack(const nlohmann::json& value, const std::string& path,
                                std::string_view reason);

nlohmann::json Encode(const SeriesRecord& r);
nlohmann::json Encode(const JobEventRecord& r);
nlohmann::json Encode(const GpuAllocationRecord& r);
nlohmann::json Encode(const StackRecord& r);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_RECORDS_H_
