// SqliteStore as a JobStore: the Python stacks of jobs, stored per daemon aggregation window and
// summed per job for a time range.
#include <algorithm>
#include <string>
#include <vector>

#include "store/job_validation.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {

Status SqliteStore::PutStacks(const std::vector<StackSample>& stacks) {
  std::vector<std::string_view> compute_ids;
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        store_internal::ValidateStackSample("stacks[" + std::to_string(i) + "]", stacks[i]));
    compute_ids.push_back(stacks[i].compute_id);
  }
  if (stacks.empty()) {
    return OkStatus();
  }
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(compute_ids));
    // A window's aggregate is final: a redelivered batch must leave the count as it was, so
    // the repeat replaces it rather than adding to it.
    // On PostgreSQL the key holds the stack's digest (migration 12), since an index entry
    // there cannot hold a long stack.
    const char* stack_key =
        db_.engine() == Engine::kPostgres ? "job_stack_digest(folded)" : "folded";
    EXPANSE_ASSIGN_OR_RETURN(
        Statement upsert,
        db_.Prepare("INSERT INTO job_stacks (" + std::string(kStackSampleColumns) +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                    "ON CONFLICT (compute_id, job_id, host, window_start_ms, " +
                    std::string(stack_key) +
                    ", thread_state, gpu_idle) DO UPDATE SET "
                    "window_end_ms = excluded.window_end_ms, count = excluded.count"));
    for (const StackSample& sample : stacks) {
      EXPANSE_RETURN_IF_ERROR(upsert.BindAll(sample.compute_id, sample.job_id, sample.host,
                                             sample.window_start_ms, sample.window_end_ms,
                                             sample.folded, sample.thread_state, sample.count,
                                             int64_t{sample.gpu_idle ? 1 : 0}));
      EXPANSE_RETURN_IF_ERROR(upsert.Run());
      upsert.Reset();
    }
    return OkStatus();
  });
}

Result<int64_t> SqliteStore::ExpireStacks(int64_t before_ms, int limit) {
  if (limit < 1 || limit > kMaxExpireStacksLimit) {
    return InvalidArgumentError("stack retention: limit is " + std::to_string(limit) +
                                "; it must be between 1 and " +
                                std::to_string(kMaxExpireStacksLimit));
  }
  return Transact(Access::kWrite, [&]() -> Result<int64_t> {
    // The oldest windows by job_stacks_by_window_end (migration 13), a row's own address from
    // each engine: SQLite's rowid, PostgreSQL's ctid (read and deleted in one statement, so
    // the address still names the same row; a TID array is a TID scan, not a join).
    const std::string oldest =
        "SELECT " + std::string(db_.engine() == Engine::kPostgres ? "ctid" : "rowid") +
        " FROM job_stacks WHERE window_end_ms < ?1 ORDER BY window_end_ms LIMIT ?2";
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute(db_.engine() == Engine::kPostgres
                        ? "DELETE FROM job_stacks WHERE ctid = ANY(ARRAY(" + oldest + "))"
                        : "DELETE FROM job_stacks WHERE rowid IN (" + oldest + ")",
                    before_ms, int64_t{limit}));
    return db_.Changes();
  });
}

Result<std::vector<StackTotal>> SqliteStore::JobStacks(std::string_view compute_id,
                                                       std::string_view job_id, int64_t from_ms,
                                                       int64_t to_ms, int limit,
                                                       size_t max_folded_bytes) {
  constexpr std::string_view kWhere = "job stacks";
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(kWhere, compute_id, job_id));
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateTimeRange(kWhere, from_ms, to_ms));
  if (limit < 1 || limit > kMaxJobStacksLimit) {
    return InvalidArgumentError(std::string(kWhere) + ": limit is " + std::to_string(limit) +
                                "; it must be between 1 and " + std::to_string(kMaxJobStacksLimit));
  }
  // Bound for a SQL integer: no read holds more than kMaxJobStacksLimit stacks of
  // kMaxFoldedStackBytes.
  const auto max_bytes = static_cast<int64_t>(
      std::min<size_t>(max_folded_bytes, size_t{kMaxJobStacksLimit} * kMaxFoldedStackBytes));
  return Transact(Access::kRead, [&]() -> Result<std::vector<StackTotal>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    // Windows [window_start_ms, window_end_ms) overlapping [from_ms, to_ms), a bound of 0 being
    // open, as in HostGpuAllocations. The sums cannot overflow: counts are capped at 10^9 per
    // row. Ties are broken by the stack's bytes, so the top-N cut is deterministic.
    // The byte budget is applied by the database (a running sum of the stacks' UTF-8 bytes), so
    // that PostgreSQL, which sends a statement's rows all at once, sends no more than it.
    const char* bytes_of =
        db_.engine() == Engine::kPostgres ? "octet_length(folded)" : "length(CAST(folded AS BLOB))";
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query("SELECT folded, thread_state, total, idle FROM ("
                  "SELECT folded, thread_state, total, idle, sum(" +
                      std::string(bytes_of) +
                      ") OVER (ORDER BY total DESC, folded, thread_state "
                      "ROWS UNBOUNDED PRECEDING) - " +
                      std::string(bytes_of) +
                      " AS bytes_before FROM ("
                      "SELECT folded, thread_state, sum(count) AS total, "
                      "sum(CASE WHEN gpu_idle = 1 THEN count ELSE 0 END) AS idle "
                      "FROM job_stacks WHERE compute_id = ?1 AND job_id = ?2 "
                      "AND (?4 = 0 OR window_start_ms < ?4) AND (?3 = 0 OR window_end_ms > ?3) "
                      "GROUP BY folded, thread_state "
                      "ORDER BY total DESC, folded, thread_state LIMIT ?5) AS top"
                      ") AS budgeted WHERE bytes_before <= ?6 "
                      "ORDER BY total DESC, folded, thread_state",
                  compute_id, job_id, from_ms, to_ms, int64_t{limit}, max_bytes));
    std::vector<StackTotal> totals;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row) {
        return totals;
      }
      totals.push_back(StackTotal{.folded = rows.ColumnText(0),
                                  .thread_state = rows.ColumnText(1),
                                  .count = rows.ColumnInt(2),
                                  .gpu_idle_count = rows.ColumnInt(3)});
    }
  });
}

}  // namespace expanse::store::sqlite_internal
