// Gathers what the verdict rules read about one job (verdict_rules.h): its series on a grid of
// cells from the telemetry store, its GPUs' models and memory from the compute's latest
// heartbeat, and, for each interval the series leave open, its stacks from the job store.
#ifndef EXPANSE_SERVER_VERDICT_EVIDENCE_H_
#define EXPANSE_SERVER_VERDICT_EVIDENCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "server/verdict_rules.h"
#include "store/job_store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

// At most this many cells per job: a 24 h job is read in 2-minute cells.
inline constexpr size_t kMaxVerdictCells = 720;
// At most this many cells per job over its GPUs' and hosts' tracks together (a 4096-GPU job on
// 512 hosts gets 43-cell grids, not 720; one of 16,384 hosts 12).
inline constexpr size_t kMaxVerdictGpuCells = 200'000;
// No cell shorter than this: samples arrive at about 1 Hz and are flushed every few seconds.
inline constexpr int64_t kMinVerdictCellMs = 10'000;

struct GpuModel {
  std::string model;
  double memory_total_mib = -1;
};

// UUID -> model and memory from a heartbeat document (docs/formats/heartbeat.md); GPUs whose
// entries lack them are absent. A document that does not parse gives an empty map.
std::map<std::string, GpuModel> GpuModelsFromHeartbeat(std::string_view heartbeat_json);

// The grid: from the job's (or its first allocation's) start to its end, or `now_ms` while it
// runs, in equal cells of about kMinVerdictCellMs or more ending exactly at the job's end, at
// most kMaxVerdictCells (fewer for jobs with many GPUs or hosts, see kMaxVerdictGpuCells).
// A job that has not started has no cells.
Result<JobCells> GatherJobCells(tsdb::TelemetryStore& tsdb, const store::JobRecord& job,
                                const std::vector<store::GpuAllocation>& allocations,
                                const std::vector<std::string>& hosts,
                                const std::map<std::string, GpuModel>& models, int64_t now_ms);

// Everything about the job on `cells` (GatherJobCells): the series verdicts and the stack (or
// CPU) verdicts of the underused intervals, ordered by start. Reads the stacks of at most
// `max_stack_reads` intervals (the longest first).
Result<std::vector<Verdict>> JobVerdicts(store::JobStore& jobs, const store::JobRecord& job,
                                         const JobCells& cells, const VerdictThresholds& thresholds,
                                         size_t max_stack_reads = 32);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_VERDICT_EVIDENCE_H_
