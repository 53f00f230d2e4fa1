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
#include "wire/field_reader.h"

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

// A job record's text limits, in bytes (DecodeJob; the controller fits SLURM's text to them).
inline constexpr size_t kMaxJobIdBytes = 64;
inline constexpr size_t kMaxJobNameBytes = 256;
inline constexpr size_t kMaxJobWordBytes = 64;  // user, account, partition
inline constexpr size_t kMaxJobStateBytes = 32;
inline constexpr size_t kMaxJobNodesBytes = 4096;

// A SLURM job as the controller saw it (squeue or sacct) at observed_ms. Times are Unix ms,
// 0 when not (yet) known; counts are 0 when SLURM did not say.
struct JobRecord {
  std::string job_id;     // clean text, 1..64 (array tasks as "<array id>_<task>")
  std::string name;       // clean text, <= 256
  std::string user;       // clean text, <= 64
  std::string account;    // clean text, <= 64
  std::string partition;  // clean text, <= 64
  std::string state;      // clean text, 1..32 (SLURM's state name, e.g. RUNNING)
  std::string nodes;      // clean text, <= 4096 (a SLURM host-list expression)
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  int64_t req_nodes = 0;
  int64_t req_cpus = 0;
  int64_t req_gpus = 0;
  int64_t req_mem_mib = 0;
  int64_t time_limit_s = 0;
  int64_t observed_ms = 0;
};

// The server's answer to POST /dp/v1/ingest and /dp/v1/sync (docs/formats/ingest-batch.md,
// "Answers"); a sync answers only store_epoch and durable_mark.
struct IngestAnswer {
  std::string batch_id;
  bool duplicate = false;
  uint64_t samples = 0;
  uint64_t jobs = 0;
  bool durable = false;
  std::string store_epoch;  // "" from a server that does not answer on receipt
  uint64_t mark = 0;
  uint64_t durable_mark = 0;
};

// The members every ingest batch starts with.
inline constexpr int64_t kIngestBatchVersion = 1;
struct BatchHeader {
  std::string stream;  // [a-z0-9_-], 1..32: the controller's upload stream
  uint64_t sequence = 0;
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
Result<JobRecord> DecodeJob(const nlohmann::json& value, const std::string& path,
                            std::string_view reason);
// The version (which must be kIngestBatchVersion), stream and sequence of a batch document.
Result<BatchHeader> DecodeBatchHeader(const FieldReader& batch);

nlohmann::json Encode(const SeriesRecord& r);
nlohmann::json Encode(const JobEventRecord& r);
nlohmann::json Encode(const GpuAllocationRecord& r);
nlohmann::json Encode(const StackRecord& r);
nlohmann::json Encode(const JobRecord& r);
nlohmann::json Encode(const IngestAnswer& a);
// A sync's answer: store_epoch and durable_mark only.
nlohmann::json EncodeSyncAnswer(const IngestAnswer& a);
// Lenient on purpose, and never fails: a member that is absent, or of another type, reads as
// its default, which the uploader treats as the safe case (not durable, no epoch: resend after
// a sync). A body that is not a JSON object reads as all defaults.
IngestAnswer DecodeIngestAnswer(std::string_view body);
// A batch document holding only its header; the caller adds the sections.
nlohmann::json EncodeBatchHeader(const BatchHeader& h);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_RECORDS_H_
