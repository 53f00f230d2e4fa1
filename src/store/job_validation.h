// Internal to the store module: the input checks of job_store.h, shared by every JobStore
// implementation so that they refuse the same records with the same messages.
//
// Each check returns kInvalidArgument whose message starts with `where` (e.g. "jobs[2]", the
// record's index in its batch) and names the offending field by its struct name, because the
// operator reading it has the ingest batch, not our code, in front of them.
#ifndef EXPANSE_STORE_JOB_VALIDATION_H_
#define EXPANSE_STORE_JOB_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "store/job_store.h"

namespace expanse::store::store_internal {

// SLURM job ids are short ("123_4", "123+1"); the cap keeps a garbled id out of indexes.
inline constexpr std::size_t kMaxJobIdBytes = 64;
inline constexpr int kMaxJobListLimit = 1000;
// Bounds the IN (...) lists of a job query, far below SQLite's limit on bound parameters.
inline constexpr std::size_t kMaxJobFilterValues = 1000;

// A non-empty compute_id and a job_id of 1..kMaxJobIdBytes bytes.
Status ValidateJobKey(std::string_view where, std::string_view compute_id, std::string_view job_id);
// The key, times and counts not negative, end_ms >= start_ms when both are set.
Status ValidateJobRecord(std::string_view where, const JobRecord& job);
// The key, a non-empty host, kind "start" or "end", at_ms > 0.
Status ValidateJobNodeEvent(std::string_view where, const JobNodeEvent& event);
// The key, non-empty host and gpu_uuid, indexes >= -1, from_ms > 0 (0 would be "unset" and
// win every "earliest" merge), to_ms 0 or >= from_ms.
Status ValidateGpuAllocation(std::string_view where, const GpuAllocation& allocation);
// The key, a non-empty host, 0 < window_start_ms < window_end_ms, count
// 1..kMaxStackSampleCount, thread_state "", "gil", "running" or "idle", and a folded stack of
// 1..kMaxFoldedStackBytes bytes of UTF-8 without control characters or empty frames.
Status ValidateStackSample(std::string_view where, const StackSample& sample);
// 1..kMaxJobFilterValues non-empty compute ids, at most kMaxJobFilterValues non-empty states,
// a valid time range, limit 1..kMaxJobListLimit, offset >= 0.
Status ValidateJobFilter(const JobFilter& filter);
// from_ms and to_ms not negative and, when both are set (non-zero), to_ms > from_ms.
Status ValidateTimeRange(std::string_view where, int64_t from_ms, int64_t to_ms);

}  // namespace expanse::store::store_internal

#endif  // EXPANSE_STORE_JOB_VALIDATION_H_
