// SqliteStore as a JobStore: what happened on each node of a job, the Prolog/Epilog events
// and the GPUs it held.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/job_validation.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

// Reads every row of `rows` with `read`.
template <typename Row, typename Reader>
Result<std::vector<Row>> ReadAll(Statement& rows, Reader read) {
  std::vector<Row> all;
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row) {
      return all;
    }
    all.push_back(read(rows));
  }
}

// Ids per IN list: far below SQLite's limit on bound parameters (999 before 3.32), and a page
// of the job list (at most 1000 jobs) takes two statements.
constexpr std::size_t kMaxIdsPerStatement = 500;

// The ids of a batch read, each once.
Result<std::vector<std::string_view>> DistinctJobIds(std::string_view where,
                                                     std::string_view compute_id,
                                                     const std::vector<std::string>& job_ids) {
  std::set<std::string_view> distinct;
  for (const std::string& job_id : job_ids) {
    EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(where, compute_id, job_id));
    distinct.insert(job_id);
  }
  return std::vector<std::string_view>(distinct.begin(), distinct.end());
}

// kInvalidArgument when a job of `rows` has more than JobStore::kMaxRowsPerJob rows in `table`
// (a write's own transaction then rolls it back). Not kResourceExhausted: the sender must not
// send the same batch again (429), it would be refused for ever.
template <typename Row>
Status CheckRowsPerJobLocked(Connection& db, std::string_view table, const std::vector<Row>& rows) {
  std::set<std::pair<std::string_view, std::string_view>> jobs;
  for (const Row& row : rows)
    jobs.emplace(row.compute_id, row.job_id);
  for (const auto& [compute_id, job_id] : jobs) {
    EXPANSE_ASSIGN_OR_RETURN(Statement count,
                             db.Query("SELECT count(*) FROM " + std::string(table) +
                                          " WHERE compute_id = ?1 AND job_id = ?2",
                                      compute_id, job_id));
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, count.Step());
    if (has_row && count.ColumnInt(0) > JobStore::kMaxRowsPerJob) {
      return InvalidArgumentError("job " + std::string(job_id) + " would have " +
                                  std::to_string(count.ColumnInt(0)) + " rows in " +
                                  std::string(table) + "; at most " +
                                  std::to_string(JobStore::kMaxRowsPerJob) + " are kept")
          .WithReason("too_many_rows_per_job");
    }
  }
  return OkStatus();
}

// "?2, ?3, ...": `slots` placeholders after the compute id's ?1.
std::string IdPlaceholders(std::size_t slots) {
  std::string text;
  for (std::size_t i = 0; i < slots; ++i) {
    text += i == 0 ? "?" : ", ?";
    text += std::to_string(i + 2);
  }
  return text;
}

// Placeholders for `ids` ids: rounded up to a power of two (the last id is bound again in the
// spare ones, which IN ignores), so that a handful of SQL texts serve every page size and stay
// in the connection's statement cache.
std::size_t IdSlots(std::size_t ids) {
  return std::min(std::bit_ceil(std::max<std::size_t>(ids, 8)), kMaxIdsPerStatement);
}

// Every row of `table` whose job is one of `job_ids`, read by `read` and grouped by job id.
// `order` sorts the rows of one job; all in IN lists of bound ids, never in the SQL text.
template <typename Row, typename Reader>
Result<std::map<std::string, std::vector<Row>>> ReadByJob(
    Connection& db, std::string_view columns, std::string_view table, std::string_view order,
    std::string_view compute_id, const std::vector<std::string_view>& job_ids, Reader read) {
  std::map<std::string, std::vector<Row>> by_job;
  for (std::size_t first = 0; first < job_ids.size(); first += kMaxIdsPerStatement) {
    const std::size_t count = std::min(kMaxIdsPerStatement, job_ids.size() - first);
    const std::size_t slots = IdSlots(count);
    const std::string rest = std::string(table) + " WHERE compute_id = ?1 AND job_id IN (" +
                             IdPlaceholders(slots) + ") ORDER BY job_id, " + std::string(order);
    EXPANSE_ASSIGN_OR_RETURN(Statement rows, db.Prepare(SelectSql(columns, rest)));
    EXPANSE_RETURN_IF_ERROR(rows.Bind(1, compute_id));
    for (std::size_t slot = 0; slot < slots; ++slot) {
      const std::string_view id = job_ids[first + std::min(slot, count - 1)];
      EXPANSE_RETURN_IF_ERROR(rows.Bind(static_cast<int>(slot) + 2, id));
    }
    // Rows come grouped by job and in `order` within a job, and a job is in one slice only.
    EXPANSE_ASSIGN_OR_RETURN(std::vector<Row> all, ReadAll<Row>(rows, read));
    for (Row& row : all) {
      std::vector<Row>& of_job = by_job[row.job_id];
      of_job.push_back(std::move(row));
    }
  }
  return by_job;
}

}  // namespace

Status SqliteStore::AddNodeEvents(const std::vector<JobNodeEvent>& events) {
  std::vector<std::string_view> compute_ids;
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        store_internal::ValidateJobNodeEvent("events[" + std::to_string(i) + "]", events[i]));
    compute_ids.push_back(events[i].compute_id);
  }
  if (events.empty()) {
    return OkStatus();
  }
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(compute_ids));
    // One event of each kind per host: the latest (a requeued job's run on the host again; a
    // duplicate delivery changes nothing). ON CONFLICT names the uniqueness conflict alone,
    // where INSERT OR REPLACE would also act on rows failing a CHECK without a word.
    EXPANSE_ASSIGN_OR_RETURN(
        Statement insert,
        db_.Prepare("INSERT INTO job_node_events (" + std::string(kJobNodeEventColumns) +
                    ") VALUES (?1, ?2, ?3, ?4, ?5) "
                    "ON CONFLICT (compute_id, job_id, host, kind) DO UPDATE SET "
                    "at_ms = CASE WHEN excluded.at_ms > job_node_events.at_ms "
                    "THEN excluded.at_ms ELSE job_node_events.at_ms END"));
    for (const JobNodeEvent& event : events) {
      EXPANSE_RETURN_IF_ERROR(
          insert.BindAll(event.compute_id, event.job_id, event.host, event.kind, event.at_ms));
      EXPANSE_RETURN_IF_ERROR(insert.Run());
      insert.Reset();
    }
    return CheckRowsPerJobLocked(db_, "job_node_events", events);
  });
}

Status SqliteStore::PutGpuAllocations(const std::vector<GpuAllocation>& allocations) {
  std::vector<std::string_view> compute_ids;
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(store_internal::ValidateGpuAllocation(
        "allocations[" + std::to_string(i) + "]", allocations[i]));
    compute_ids.push_back(allocations[i].compute_id);
  }
  if (allocations.empty()) {
    return OkStatus();
  }
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(compute_ids));
    // Reports of one allocation arrive in any order: the interval only ever widens (earliest
    // from_ms, latest to_ms, so a non-zero to_ms stays over a late 0), and a known GPU index
    // or minor is never replaced by -1. Except an opening at or after the stored end (and
    // after the stored start: [t, t] is a run whose clock stepped back, and its own opening
    // may come again): the job holds the GPU again in a new run (requeued), which replaces the
    // ended one; widened, the row would count the time between the runs. CASE rather than
    // min()/max(), which PostgreSQL calls LEAST/GREATEST.
    const std::string new_run =
        "(excluded.to_ms = 0 AND gpu_allocations.to_ms <> 0 "
        "AND excluded.from_ms >= gpu_allocations.to_ms "
        "AND excluded.from_ms > gpu_allocations.from_ms)";
    EXPANSE_ASSIGN_OR_RETURN(
        Statement upsert,
        db_.Prepare("INSERT INTO gpu_allocations (" + std::string(kGpuAllocationColumns) +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                    "ON CONFLICT (compute_id, job_id, host, gpu_uuid) DO UPDATE SET "
                    "gpu_index = CASE WHEN excluded.gpu_index >= 0 THEN excluded.gpu_index "
                    "ELSE gpu_allocations.gpu_index END, "
                    "gpu_minor = CASE WHEN excluded.gpu_minor >= 0 THEN excluded.gpu_minor "
                    "ELSE gpu_allocations.gpu_minor END, "
                    "from_ms = CASE WHEN " +
                    new_run +
                    " OR excluded.from_ms < gpu_allocations.from_ms "
                    "THEN excluded.from_ms ELSE gpu_allocations.from_ms END, "
                    "to_ms = CASE WHEN " +
                    new_run +
                    " OR excluded.to_ms > gpu_allocations.to_ms "
                    "THEN excluded.to_ms ELSE gpu_allocations.to_ms END"));
    for (const GpuAllocation& allocation : allocations) {
      EXPANSE_RETURN_IF_ERROR(upsert.BindAll(
          allocation.compute_id, allocation.job_id, allocation.host, allocation.gpu_uuid,
          allocation.gpu_index, allocation.gpu_minor, allocation.from_ms, allocation.to_ms));
      EXPANSE_RETURN_IF_ERROR(upsert.Run());
      upsert.Reset();
    }
    return CheckRowsPerJobLocked(db_, "gpu_allocations", allocations);
  });
}

Result<std::vector<JobNodeEvent>> SqliteStore::NodeEvents(std::string_view compute_id,
                                                          std::string_view job_id) {
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey("node events", compute_id, job_id));
  return Transact(Access::kRead, [&]() -> Result<std::vector<JobNodeEvent>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    EXPANSE_ASSIGN_OR_RETURN(Statement rows,
                             db_.Query(SelectSql(kJobNodeEventColumns,
                                                 "job_node_events WHERE compute_id = ?1 AND "
                                                 "job_id = ?2 ORDER BY at_ms, host, kind DESC"),
                                       compute_id, job_id));
    return ReadAll<JobNodeEvent>(rows, ReadJobNodeEvent);
  });
}

Result<std::vector<GpuAllocation>> SqliteStore::GpuAllocations(std::string_view compute_id,
                                                               std::string_view job_id) {
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey("GPU allocations", compute_id, job_id));
  return Transact(Access::kRead, [&]() -> Result<std::vector<GpuAllocation>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows, db_.Query(SelectSql(kGpuAllocationColumns,
                                            "gpu_allocations WHERE compute_id = ?1 AND job_id = ?2 "
                                            "ORDER BY host, gpu_index, gpu_uuid"),
                                  compute_id, job_id));
    return ReadAll<GpuAllocation>(rows, ReadGpuAllocation);
  });
}

Result<NodeEventsByJob> SqliteStore::NodeEventsFor(std::string_view compute_id,
                                                   const std::vector<std::string>& job_ids) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string_view> ids,
                           DistinctJobIds("node events", compute_id, job_ids));
  return Transact(Access::kRead, [&]() -> Result<NodeEventsByJob> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    return ReadByJob<JobNodeEvent>(db_, kJobNodeEventColumns, "job_node_events",
                                   "at_ms, host, kind DESC", compute_id, ids, ReadJobNodeEvent);
  });
}

Result<GpuAllocationsByJob> SqliteStore::GpuAllocationsFor(
    std::string_view compute_id, const std::vector<std::string>& job_ids) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string_view> ids,
                           DistinctJobIds("GPU allocations", compute_id, job_ids));
  return Transact(Access::kRead, [&]() -> Result<GpuAllocationsByJob> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    return ReadByJob<GpuAllocation>(db_, kGpuAllocationColumns, "gpu_allocations",
                                    "host, gpu_index, gpu_uuid", compute_id, ids,
                                    ReadGpuAllocation);
  });
}

Result<std::vector<GpuAllocation>> SqliteStore::HostGpuAllocations(std::string_view compute_id,
                                                                   std::string_view host,
                                                                   int64_t from_ms, int64_t to_ms) {
  constexpr std::string_view kWhere = "host GPU allocations";
  if (compute_id.empty() || host.empty()) {
    return InvalidArgumentError(std::string(kWhere) + ": " +
                                (compute_id.empty() ? "compute_id" : "host") + " is empty");
  }
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateTimeRange(kWhere, from_ms, to_ms));
  return Transact(Access::kRead, [&]() -> Result<std::vector<GpuAllocation>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    // [from_ms, to_ms) of the allocation (to_ms 0: still held) against the query's; a bound
    // of 0 is open. ?3 = 0 and ?4 = 0 keep one statement for every combination of bounds.
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows, db_.Query(SelectSql(kGpuAllocationColumns,
                                            "gpu_allocations WHERE compute_id = ?1 AND host = ?2 "
                                            "AND (?4 = 0 OR from_ms < ?4) "
                                            "AND (?3 = 0 OR to_ms = 0 OR to_ms > ?3) "
                                            "ORDER BY from_ms, gpu_index, gpu_uuid, job_id"),
                                  compute_id, host, from_ms, to_ms));
    return ReadAll<GpuAllocation>(rows, ReadGpuAllocation);
  });
}

}  // namespace expanse::store::sqlite_internal
