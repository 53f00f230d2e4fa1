// The capture agent's always-on aggregate (docs/formats/capture-spool.md, "Aggregates"): one
// process's CUDA activity over one window. The agent writes it into the node-local capture
// spool; the sampler decodes it there with DecodeCaptureAggregate, as hostile input (a job's
// user wrote the file), and the same document then travels on to the server.
#ifndef EXPANSE_WIRE_CAPTURE_RECORDS_H_
#define EXPANSE_WIRE_CAPTURE_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::wire {

inline constexpr char kCaptureAggregateFormat[] = "expanse-capture-aggregate/1";
inline constexpr size_t kMaxCaptureTopEntries = 20;
inline constexpr size_t kMaxCaptureNameBytes = 512;
inline constexpr int64_t kMaxCaptureWindowMs = 3'600'000;
inline constexpr int64_t kMaxCaptureCount = int64_t{1} << 50;

struct CaptureTotal {
  std::string name;  // kernel or NVTX name; memcpy direction; synchronisation type
  int64_t count = 0;
  int64_t ns = 0;     // GPU time (kernels, copies, memsets) or wall time (syncs, NVTX)
  int64_t bytes = 0;  // copies and memsets
};

struct CaptureAggregateRecord {
  std::string job_id;  // SLURM's numeric job id
  std::string step_id;
  std::string rank;
  std::string host;
  int64_t pid = 0;
  int64_t uid = 0;  // the account the agent ran as (the job's user)
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;  // > start, at most kMaxCaptureWindowMs later
  std::vector<int64_t> devices;
  int64_t kernel_count = 0;
  int64_t kernel_ns = 0;
  std::vector<CaptureTotal> top_kernels;  // longest first
  CaptureTotal other_kernels;
  std::vector<CaptureTotal> memcpy;  // by direction: htod, dtoh, dtod, htoh, ptop, other
  CaptureTotal memset;
  std::vector<CaptureTotal> sync;  // by type: device, stream, event, stream_wait_event, other
  std::vector<CaptureTotal> nvtx_ranges;  // longest first
  int64_t nvtx_marks = 0;
  int64_t dropped_records = 0;
};

// Decodes one aggregate; kInvalidArgument with `reason` naming the first bad field by its path.
Result<CaptureAggregateRecord> DecodeCaptureAggregate(const nlohmann::json& value,
                                                      const std::string& path,
                                                      std::string_view reason);
nlohmann::json Encode(const CaptureAggregateRecord& r);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_CAPTURE_RECORDS_H_
