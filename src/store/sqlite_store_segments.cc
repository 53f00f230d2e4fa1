// SqliteStore as a JobStore: the list of the capture agent's trace segments. The bytes are not
// here but in the segment store (server/segment_store.h), named by the same (compute, sha256).
#include <string>
#include <vector>

#include "store/job_validation.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

constexpr size_t kMaxTriggerIdBytes = 128;
constexpr size_t kMaxTriggerReasonBytes = 64;
constexpr const char* kColumns =
    "compute_id, sha256, job_id, host, pid, window_start_ms, window_end_ms, trigger_id, "
    "trigger_reason, bytes, events, received_ms, pc_sampling";

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64)
    return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

Status ValidateSha256(std::string_view where, std::string_view sha256) {
  if (!IsSha256Hex(sha256))
    return InvalidArgumentError(std::string(where) + ": sha256 must be 64 lowercase hex digits");
  return OkStatus();
}

Status ValidateSegment(const TraceSegmentRecord& s) {
  const std::string where = "trace segment";
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(where, s.compute_id, s.job_id));
  EXPANSE_RETURN_IF_ERROR(ValidateSha256(where, s.sha256));
  if (s.host.empty())
    return InvalidArgumentError(where + ": host is empty");
  if (s.pid <= 0 || s.pid > (int64_t{1} << 31))
    return InvalidArgumentError(where + ": pid " + std::to_string(s.pid) + " is out of range");
  if (s.window_start_ms <= 0 || s.window_end_ms <= s.window_start_ms) {
    return InvalidArgumentError(where + ": window [" + std::to_string(s.window_start_ms) + ", " +
                                std::to_string(s.window_end_ms) + ") is empty or before 1970");
  }
  if (s.trigger_id.empty() || s.trigger_id.size() > kMaxTriggerIdBytes)
    return InvalidArgumentError(where + ": trigger_id must be 1..128 bytes");
  if (s.trigger_reason.empty() || s.trigger_reason.size() > kMaxTriggerReasonBytes)
    return InvalidArgumentError(where + ": trigger_reason must be 1..64 bytes");
  if (s.pc_sampling.size() > kMaxSegmentPcSamplingBytes)
    return InvalidArgumentError(where + ": pc_sampling is longer than 4096 bytes");
  if (s.bytes <= 0 || s.events < 0 || s.received_ms <= 0)
    return InvalidArgumentError(where +
                                ": bytes and received_ms must be positive, events not "
                                "negative");
  return OkStatus();
}

// The row a SELECT of kColumns is on.
TraceSegmentRecord SegmentAt(Statement& rows) {
  return TraceSegmentRecord{.compute_id = rows.ColumnText(0),
                            .sha256 = rows.ColumnText(1),
                            .job_id = rows.ColumnText(2),
                            .host = rows.ColumnText(3),
                            .pid = rows.ColumnInt(4),
                            .window_start_ms = rows.ColumnInt(5),
                            .window_end_ms = rows.ColumnInt(6),
                            .trigger_id = rows.ColumnText(7),
                            .trigger_reason = rows.ColumnText(8),
                            .bytes = rows.ColumnInt(9),
                            .events = rows.ColumnInt(10),
                            .received_ms = rows.ColumnInt(11),
                            .pc_sampling = rows.ColumnText(12)};
}

Result<std::vector<TraceSegmentRecord>> AllSegments(Statement& rows) {
  std::vector<TraceSegmentRecord> out;
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row)
      return out;
    out.push_back(SegmentAt(rows));
  }
}

}  // namespace

Result<bool> SqliteStore::PutTraceSegment(const TraceSegmentRecord& s) {
  EXPANSE_RETURN_IF_ERROR(ValidateSegment(s));
  return Transact(Access::kWrite, [&]() -> Result<bool> {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked({s.compute_id}));
    EXPANSE_ASSIGN_OR_RETURN(
        Statement insert,
        db_.Prepare(std::string("INSERT INTO trace_segments (") + kColumns +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
                    "ON CONFLICT (compute_id, sha256) DO NOTHING"));
    EXPANSE_RETURN_IF_ERROR(insert.BindAll(
        s.compute_id, s.sha256, s.job_id, s.host, s.pid, s.window_start_ms, s.window_end_ms,
        s.trigger_id, s.trigger_reason, s.bytes, s.events, s.received_ms, s.pc_sampling));
    EXPANSE_RETURN_IF_ERROR(insert.Run());
    return db_.Changes() > 0;
  });
}

Result<std::vector<TraceSegmentRecord>> SqliteStore::JobTraceSegments(std::string_view compute_id,
                                                                      std::string_view job_id,
                                                                      int64_t from_ms,
                                                                      int64_t to_ms, int limit) {
  constexpr std::string_view kWhere = "job trace segments";
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(kWhere, compute_id, job_id));
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateTimeRange(kWhere, from_ms, to_ms));
  if (limit < 1 || limit > kMaxJobTraceSegments) {
    return InvalidArgumentError(std::string(kWhere) + ": limit is " + std::to_string(limit) +
                                "; it must be between 1 and " +
                                std::to_string(kMaxJobTraceSegments));
  }
  return Transact(Access::kRead, [&]() -> Result<std::vector<TraceSegmentRecord>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(std::string("SELECT ") + kColumns +
                      " FROM trace_segments WHERE compute_id = ?1 AND job_id = ?2 "
                      "AND (?4 = 0 OR window_start_ms < ?4) AND (?3 = 0 OR window_end_ms > ?3) "
                      "ORDER BY window_start_ms, host, pid, sha256 LIMIT ?5",
                  compute_id, job_id, from_ms, to_ms, int64_t{limit}));
    return AllSegments(rows);
  });
}

Result<TraceSegmentRecord> SqliteStore::GetTraceSegment(std::string_view compute_id,
                                                        std::string_view sha256) {
  EXPANSE_RETURN_IF_ERROR(ValidateSha256("trace segment", sha256));
  return Transact(Access::kRead, [&]() -> Result<TraceSegmentRecord> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows, db_.Query(std::string("SELECT ") + kColumns +
                                      " FROM trace_segments WHERE compute_id = ?1 AND sha256 = ?2",
                                  compute_id, sha256));
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row)
      return NotFoundError("trace segment " + std::string(sha256) + " not found");
    return SegmentAt(rows);
  });
}

Result<std::vector<TraceSegmentRecord>> SqliteStore::ExpireTraceSegments(
    int64_t before_ms, int limit,
    const std::function<Status(const TraceSegmentRecord&)>& remove_bytes) {
  if (limit < 1 || limit > kMaxJobTraceSegments)
    return InvalidArgumentError("expire trace segments: limit must be 1.." +
                                std::to_string(kMaxJobTraceSegments));
  Result<std::vector<TraceSegmentRecord>> read =
      Transact(Access::kRead, [&]() -> Result<std::vector<TraceSegmentRecord>> {
        EXPANSE_ASSIGN_OR_RETURN(Statement rows,
                                 db_.Query(std::string("SELECT ") + kColumns +
                                               " FROM trace_segments WHERE received_ms < ?1 "
                                               "ORDER BY received_ms, compute_id, sha256 LIMIT ?2",
                                           before_ms, int64_t{limit}));
        return AllSegments(rows);
      });
  if (!read.ok())
    return read.status();
  std::vector<TraceSegmentRecord> expired = std::move(*read);
  // The bytes outside any transaction: a bucket's DELETE may take seconds (two minutes at
  // its deadline), and a write transaction holds every replica's writers' lock. Bytes first,
  // records after, so no record is forgotten with its bytes still kept (nothing would find
  // them again); another replica expiring the same records at once removes the same bytes.
  Status failed = OkStatus();
  size_t removed = 0;
  for (; removed < expired.size() && failed.ok(); ++removed)
    failed = remove_bytes(expired[removed]);
  if (!failed.ok())
    --removed;
  expired.resize(removed);
  if (!expired.empty()) {
    const Status forgotten = Transact(Access::kWrite, [&]() -> Status {
      EXPANSE_ASSIGN_OR_RETURN(
          Statement remove,
          db_.Prepare("DELETE FROM trace_segments WHERE compute_id = ?1 AND sha256 = ?2"));
      for (const TraceSegmentRecord& s : expired) {
        EXPANSE_RETURN_IF_ERROR(remove.BindAll(s.compute_id, s.sha256));
        EXPANSE_RETURN_IF_ERROR(remove.Run());
        remove.Reset();
      }
      return OkStatus();
    });
    if (!forgotten.ok())
      return forgotten;
  }
  if (!failed.ok())
    return failed;
  return expired;
}

}  // namespace expanse::store::sqlite_internal
