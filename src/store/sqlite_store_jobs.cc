// SqliteStore as a JobStore: job records and the job list query. Node events and GPU
// allocations are in sqlite_store_job_hosts.cc.
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "store/job_validation.h"
#include "store/message_text.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

using store_internal::IdForMessage;

// Values for SQL whose shape depends on the request (IN lists, optional conditions). The text
// gets only the numbered placeholders Add() returns; the values are bound, as everywhere.
class BoundValues {
 public:
  std::string Add(int64_t value) {
    values_.emplace_back(value);
    return Placeholder();
  }
  // `value` must outlive Bind().
  std::string Add(std::string_view value) {
    values_.emplace_back(value);
    return Placeholder();
  }
  // "?3, ?4, ?5" for the values of `list`, which must outlive Bind().
  std::string AddList(const std::vector<std::string>& list) {
    std::string placeholders;
    for (const std::string& value : list) {
      placeholders += placeholders.empty() ? "" : ", ";
      placeholders += Add(std::string_view(value));
    }
    return placeholders;
  }

  Status Bind(Statement& statement) const {
    for (std::size_t i = 0; i < values_.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      EXPANSE_RETURN_IF_ERROR(
          std::visit([&](const auto& value) { return statement.Bind(index, value); }, values_[i]));
    }
    return OkStatus();
  }

 private:
  // Appending, not `"?" + std::to_string(n)`: g++ 12 -O3 reports a false -Wrestrict there.
  std::string Placeholder() const {
    std::string out = "?";
    out += std::to_string(values_.size());
    return out;
  }

  std::vector<std::variant<int64_t, std::string_view>> values_;
};

// The filter's conditions on one compute's jobs, " AND ..." each, with their values added to
// `values`.
std::string FilterConditions(const JobFilter& filter, BoundValues& values) {
  std::string sql;
  if (!filter.states.empty()) {
    sql += " AND state IN (" + values.AddList(filter.states) + ")";
  }
  if (!filter.user.empty()) {
    sql += " AND \"user\" = " + values.Add(std::string_view(filter.user));
  }
  if (!filter.account.empty()) {
    sql += " AND account = " + values.Add(std::string_view(filter.account));
  }
  if (!filter.partition.empty()) {
    sql += " AND partition = " + values.Add(std::string_view(filter.partition));
  }
  // [start_ms, end_ms) overlaps [from_ms, to_ms), end_ms 0 being open. A job that has not
  // started has no interval, so it only matches a query without time bounds.
  if (filter.from_ms != 0 || filter.to_ms != 0) {
    sql += " AND start_ms <> 0";
  }
  if (filter.from_ms != 0) {
    sql += " AND (end_ms = 0 OR end_ms > " + values.Add(filter.from_ms) + ")";
  }
  if (filter.to_ms != 0) {
    sql += " AND start_ms < " + values.Add(filter.to_ms);
  }
  return sql;
}

// Above this many computes the page is cut from one sort of all their matching jobs' keys
// rather than from a merge of one ordered read per compute (SQLite allows 500 arms to a
// compound SELECT, and each arm costs planning).
constexpr std::size_t kMaxMergedComputes = 32;

// The job list's order. sort_ms is the indexed generated column (migration 4), start_ms or,
// for a job that has not started, submit_ms; compute_id last makes the order total, so that
// pages neither repeat nor skip a job.
constexpr std::string_view kListOrder = " ORDER BY sort_ms DESC, job_id, compute_id";

// The FROM/WHERE/ORDER part of ListJobs, with its values added to `values`. Two steps in one
// statement: the row ids of the page, cut from the jobs' keys in list order, then those rows.
// Each compute's arm reads at most offset + limit keys in order from jobs_by_compute_sort
// (its own ORDER BY and LIMIT), so neither step sorts more than the arms' heads, and the jobs
// skipped by the offset cost an index entry each (plus their row only when a filter needs
// it). The arms' own limits matter on PostgreSQL: it does not merge UNION ALL arms whose index
// order leaves out the constant compute_id, and sorted every job of the computes instead
// (430 ms for a page of 1,000 of 1 M jobs over two computes; 2 ms with the limits).
std::string ListJobsSql(const JobFilter& filter, BoundValues& values, Engine engine) {
  // A row's physical id: SQLite's rowid, PostgreSQL's ctid (stable within the statement).
  const std::string row_id = engine == Engine::kSqlite ? "rowid" : "ctid";
  const std::set<std::string_view> computes(filter.compute_ids.begin(), filter.compute_ids.end());
  const std::string conditions = FilterConditions(filter, values);
  const std::string keys =
      "SELECT " + row_id + " AS row_id, sort_ms, job_id, compute_id FROM jobs WHERE ";
  std::string page;
  if (computes.size() > kMaxMergedComputes) {
    page = keys + "compute_id IN (" + values.AddList(filter.compute_ids) + ")" + conditions;
  } else {
    const std::string arm_limit = values.Add(int64_t{filter.limit} + filter.offset);
    int arm = 0;
    for (const std::string_view compute_id : computes) {
      page += page.empty() ? "" : " UNION ALL ";
      page += "SELECT * FROM (" + keys + "compute_id = " + values.Add(compute_id) + conditions +
              " ORDER BY sort_ms DESC, job_id LIMIT " + arm_limit + ") AS arm" +
              std::to_string(arm++);
    }
  }
  page += kListOrder;
  page += " LIMIT " + values.Add(int64_t{filter.limit});
  page += " OFFSET " + values.Add(int64_t{filter.offset});
  return "jobs WHERE " + row_id + " IN (SELECT row_id FROM (" + page + ") AS page)" +
         std::string(kListOrder);
}

std::string JobName(std::string_view compute_id, std::string_view job_id) {
  return "job " + IdForMessage(job_id) + " of compute " + IdForMessage(compute_id);
}

}  // namespace

Status SqliteStore::CheckComputesExistLocked(const std::vector<std::string_view>& compute_ids) {
  std::set<std::string_view> checked;
  for (const std::string_view compute_id : compute_ids) {
    if (checked.insert(compute_id).second) {
      EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    }
  }
  return OkStatus();
}

Status SqliteStore::UpsertJobs(const std::vector<JobRecord>& jobs) {
  std::vector<std::string_view> compute_ids;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        store_internal::ValidateJobRecord("jobs[" + std::to_string(i) + "]", jobs[i]));
    compute_ids.push_back(jobs[i].compute_id);
  }
  if (jobs.empty()) {
    return OkStatus();
  }
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(compute_ids));
    EXPANSE_ASSIGN_OR_RETURN(
        Statement upsert,
        db_.Prepare(
            "INSERT INTO jobs (" + std::string(kJobColumns) +
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
            "?16, ?17) ON CONFLICT (compute_id, job_id) DO UPDATE SET "
            "name = excluded.name, \"user\" = excluded.\"user\", account = excluded.account, "
            "partition = excluded.partition, state = excluded.state, "
            "nodes = excluded.nodes, submit_ms = excluded.submit_ms, "
            "start_ms = excluded.start_ms, end_ms = excluded.end_ms, "
            "req_nodes = excluded.req_nodes, req_cpus = excluded.req_cpus, "
            "req_gpus = excluded.req_gpus, req_mem_mib = excluded.req_mem_mib, "
            "time_limit_s = excluded.time_limit_s, observed_ms = excluded.observed_ms "
            // Decided per row by SQL, so a batch holding two versions of one job, or
            // a redelivered old batch, still ends with the newest observation.
            "WHERE excluded.observed_ms >= jobs.observed_ms"));
    for (const JobRecord& job : jobs) {
      EXPANSE_RETURN_IF_ERROR(upsert.BindAll(
          job.compute_id, job.job_id, job.name, job.user, job.account, job.partition, job.state,
          job.nodes, job.submit_ms, job.start_ms, job.end_ms, job.req_nodes, job.req_cpus,
          job.req_gpus, job.req_mem_mib, job.time_limit_s, job.observed_ms));
      EXPANSE_RETURN_IF_ERROR(upsert.Run());
      upsert.Reset();
    }
    return OkStatus();
  });
}

Result<JobRecord> SqliteStore::GetJob(std::string_view compute_id, std::string_view job_id) {
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey("job", compute_id, job_id));
  return Transact(Access::kRead, [&]() -> Result<JobRecord> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    return QueryOneLocked<JobRecord>(
        ReadJobRecord, NotFoundError(JobName(compute_id, job_id) + " not found"),
        SelectSql(kJobColumns, "jobs WHERE compute_id = ?1 AND job_id = ?2"), compute_id, job_id);
  });
}

Result<std::vector<JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobFilter(filter));
  return Transact(Access::kRead, [&]() -> Result<std::vector<JobRecord>> {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(
        std::vector<std::string_view>(filter.compute_ids.begin(), filter.compute_ids.end())));
    BoundValues values;
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Prepare(SelectSql(kJobColumns, ListJobsSql(filter, values, db_.engine()))));
    EXPANSE_RETURN_IF_ERROR(values.Bind(rows));
    std::vector<JobRecord> jobs;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row) {
        return jobs;
      }
      jobs.push_back(ReadJobRecord(rows));
    }
  });
}

}  // namespace expanse::store::sqlite_internal
