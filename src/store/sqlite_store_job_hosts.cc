// SqliteStore as a JobStore: what happened on each node of a job, the Prolog/Epilog events
// and the GPUs it held.
#include <string>
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
    // The first delivery wins, also its at_ms. DO NOTHING names the uniqueness conflict
    // alone, where INSERT OR IGNORE would also skip rows failing a CHECK without a word.
    EXPANSE_ASSIGN_OR_RETURN(
        Statement insert,
        db_.Prepare("INSERT INTO job_node_events (" + std::string(kJobNodeEventColumns) +
                    ") VALUES (?1, ?2, ?3, ?4, ?5) "
                    "ON CONFLICT (compute_id, job_id, host, kind) DO NOTHING"));
    for (const JobNodeEvent& event : events) {
      EXPANSE_RETURN_IF_ERROR(
          insert.BindAll(event.compute_id, event.job_id, event.host, event.kind, event.at_ms));
      EXPANSE_RETURN_IF_ERROR(insert.Run());
      insert.Reset();
    }
    return OkStatus();
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
    // from_ms, latest to_ms, and max() keeps a non-zero to_ms over a late 0), and a known GPU
    // index or minor is never replaced by -1.
    EXPANSE_ASSIGN_OR_RETURN(
        Statement upsert,
        db_.Prepare("INSERT INTO gpu_allocations (" + std::string(kGpuAllocationColumns) +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                    "ON CONFLICT (compute_id, job_id, host, gpu_uuid) DO UPDATE SET "
                    "gpu_index = CASE WHEN excluded.gpu_index >= 0 THEN excluded.gpu_index "
                    "ELSE gpu_allocations.gpu_index END, "
                    "gpu_minor = CASE WHEN excluded.gpu_minor >= 0 THEN excluded.gpu_minor "
                    "ELSE gpu_allocations.gpu_minor END, "
                    "from_ms = min(gpu_allocations.from_ms, excluded.from_ms), "
                    "to_ms = max(gpu_allocations.to_ms, excluded.to_ms)"));
    for (const GpuAllocation& allocation : allocations) {
      EXPANSE_RETURN_IF_ERROR(upsert.BindAll(
          allocation.compute_id, allocation.job_id, allocation.host, allocation.gpu_uuid,
          allocation.gpu_index, allocation.gpu_minor, allocation.from_ms, allocation.to_ms));
      EXPANSE_RETURN_IF_ERROR(upsert.Run());
      upsert.Reset();
    }
    return OkStatus();
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
