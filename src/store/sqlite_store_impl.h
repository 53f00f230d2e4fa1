// Internal to the store module: the SqliteStore class behind OpenSqliteStore. Its methods
// are defined in sqlite_store_*.cc, one file per area of store.h and job_store.h. It is its
// own JobStore, so jobs share the connection, the mutex and the transaction discipline.
//
// Concurrency: one connection, guarded by mu_, and on PostgreSQL a second one for the ingest
// batch ledger (LedgerStatement). Every public method runs as one
// transaction through Transact(); writers take the database's write lock before reading
// anything they decide on (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-scoped advisory
// lock every writer takes, BeginSql), which is what makes checks such as "this install token
// is unused" race-free also between processes sharing the database: replicas of the server on
// one PostgreSQL serialise their writes as processes on one SQLite file do.
// Methods whose names end in Locked run inside an open transaction and do not lock.
#ifndef EXPANSE_STORE_SQLITE_STORE_IMPL_H_
#define EXPANSE_STORE_SQLITE_STORE_IMPL_H_

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "store/job_store.h"
#include "store/sql_connection.h"
#include "store/store.h"

namespace expanse::store::sqlite_internal {

class SqliteStore final : public Store, public JobStore {
 public:
  explicit SqliteStore(Connection db) : db_(std::move(db)) {}
  // With the ingest batch ledger's own connection (PostgreSQL; see LedgerStatement).
  SqliteStore(Connection db, Connection ledger) : db_(std::move(db)), ledger_(std::move(ledger)) {}

  Result<Organization> CreateOrganization(std::string_view slug, std::string_view name,
                                          int64_t now_ms) override;
  Result<Organization> GetOrganization(int64_t id) override;
  Result<Organization> GetOrganizationBySlug(std::string_view slug) override;
  Result<User> CreateUser(std::string_view email, std::string_view display_name,
                          std::string_view password_hash, int64_t now_ms) override;
  Result<User> GetUser(int64_t id) override;
  Result<User> GetUserByEmail(std::string_view email) override;
  Status SetUserPassword(int64_t user_id, std::string_view password_hash) override;
  Status PutMembership(const Membership& membership) override;
  Result<Membership> GetMembership(int64_t org_id, int64_t user_id) override;
  Result<std::vector<Membership>> ListMembershipsOfUser(int64_t user_id) override;

  Status CreateSession(const Session& session) override;
  Result<Session> GetSession(std::string_view id_hash, int64_t now_ms) override;
  Status DeleteSession(std::string_view id_hash) override;
  Result<ApiToken> CreateApiToken(const ApiToken& token) override;
  Result<ApiToken> GetApiTokenByHash(std::string_view token_hash) override;
  Status RevokeApiToken(int64_t id, int64_t now_ms) override;
  Result<std::vector<ApiToken>> ListApiTokens(int64_t org_id, int64_t user_id) override;

  Result<Compute> CreateCompute(const Compute& compute) override;
  Result<Compute> GetCompute(std::string_view id) override;
  Result<std::vector<Compute>> ListComputes(int64_t org_id) override;
  Result<std::vector<Compute>> ListAllComputes(int limit) override;
  Result<InstallToken> IssueInstallToken(const InstallToken& token) override;
  Result<InstallToken> GetInstallTokenByHash(std::string_view token_hash) override;
  Result<Credential> ExchangeInstallToken(std::string_view token_hash, const Credential& credential,
                                          int64_t now_ms) override;
  Result<Credential> GetCredentialByHash(std::string_view secret_hash) override;
  Result<CredentialAndCompute> GetCredentialAndComputeByHash(std::string_view secret_hash) override;
  Result<Credential> GetCredential(int64_t id) override;

  Status RecordHeartbeat(const Heartbeat& heartbeat) override;
  Result<Heartbeat> LatestHeartbeat(std::string_view compute_id) override;
  Result<int> MarkStaleComputes(int64_t cutoff_ms) override;
  Status DeprovisionCompute(std::string_view compute_id, int64_t now_ms) override;

  Status Ping() override;
  Status AppendAudit(const AuditEvent& event) override;
  Result<std::vector<AuditEvent>> ListAudit(int64_t org_id, int limit) override;

  Result<AlertRule> CreateAlertRule(const AlertRule& rule) override;
  Result<std::vector<AlertRule>> ListAlertRules(int64_t org_id) override;
  Status DeleteAlertRule(int64_t org_id, int64_t rule_id) override;
  Result<AlertRule> SetAlertRuleEnabled(int64_t org_id, int64_t rule_id, bool enabled) override;
  Result<AlertDelivery> ClaimAlertDelivery(const AlertDelivery& delivery) override;
  Result<AlertDelivery> GetAlertDelivery(int64_t rule_id, std::string_view subject) override;
  Status UpdateAlertDelivery(const AlertDelivery& delivery) override;
  Result<bool> TakeAlertDelivery(int64_t id, std::string_view state, int64_t seen_updated_at_ms,
                                 int64_t now_ms) override;
  Result<int64_t> CountAlertDeliveries(int64_t rule_id, std::string_view state,
                                       int64_t since_ms) override;
  Result<std::vector<AlertDelivery>> ListAlertDeliveries(int64_t org_id, int64_t rule_id,
                                                         std::string_view state,
                                                         int limit) override;

  Result<ComputeRequest> CreateComputeRequest(const ComputeRequest& request) override;
  Result<std::vector<ComputeRequest>> ListComputeRequests(std::string_view compute_id,
                                                          std::string_view state,
                                                          int limit) override;
  Result<ComputeRequest> FinishComputeRequest(std::string_view compute_id, int64_t id, bool ok,
                                              std::string_view result, int64_t now_ms) override;

  JobStore& Jobs() override { return *this; }
  Status UpsertJobs(const std::vector<JobRecord>& jobs) override;
  Status AddNodeEvents(const std::vector<JobNodeEvent>& events) override;
  Status PutGpuAllocations(const std::vector<GpuAllocation>& allocations) override;
  Result<JobRecord> GetJob(std::string_view compute_id, std::string_view job_id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  Result<std::vector<JobNodeEvent>> NodeEvents(std::string_view compute_id,
                                               std::string_view job_id) override;
  Result<std::vector<GpuAllocation>> GpuAllocations(std::string_view compute_id,
                                                    std::string_view job_id) override;
  Result<NodeEventsByJob> NodeEventsFor(std::string_view compute_id,
                                        const std::vector<std::string>& job_ids) override;
  Result<GpuAllocationsByJob> GpuAllocationsFor(std::string_view compute_id,
                                                const std::vector<std::string>& job_ids) override;
  Result<std::vector<GpuAllocation>> HostGpuAllocations(std::string_view compute_id,
                                                        std::string_view host, int64_t from_ms,
                                                        int64_t to_ms) override;
  Result<std::vector<BatchClaim>> MarkAndClaimIngestBatches(
      const std::vector<std::string_view>& to_mark, const std::vector<BatchToClaim>& batches,
      int64_t now_ms, int64_t lease_ms) override;
  Status MarkIngestBatchesStored(const std::vector<std::string_view>& batch_ids,
                                 int64_t now_ms) override;
  Status ReleaseIngestBatches(const std::vector<std::string_view>& batch_ids,
                              int64_t claimed_at_ms) override;
  Result<int64_t> ForgetIngestBatches(int64_t before_ms) override;
  Status PutStacks(const std::vector<StackSample>& stacks) override;
  Result<int64_t> ExpireStacks(int64_t before_ms, int limit) override;
  Result<std::vector<StackTotal>> JobStacks(std::string_view compute_id, std::string_view job_id,
                                            int64_t from_ms, int64_t to_ms, int limit,
                                            size_t max_folded_bytes = kMaxJobStacksBytes) override;
  Status PutCaptureWindows(const std::vector<CaptureWindow>& windows) override;
  Result<bool> PutTraceSegment(const TraceSegmentRecord& segment) override;
  Result<std::vector<TraceSegmentRecord>> JobTraceSegments(std::string_view compute_id,
                                                           std::string_view job_id, int64_t from_ms,
                                                           int64_t to_ms, int limit) override;
  Result<TraceSegmentRecord> GetTraceSegment(std::string_view compute_id,
                                             std::string_view sha256) override;
  Result<std::vector<TraceSegmentRecord>> ExpireTraceSegments(
      int64_t before_ms, int limit,
      const std::function<Status(const TraceSegmentRecord&)>& remove_bytes) override;
  Result<std::vector<CaptureWindow>> JobCaptureWindows(std::string_view compute_id,
                                                       std::string_view job_id, int64_t from_ms,
                                                       int64_t to_ms, int limit,
                                                       size_t max_doc_bytes) override;

 private:
  enum class Access { kRead, kWrite };

  // Runs body() (returning Status or Result<T>) in one transaction under mu_: commits when
  // it succeeds, rolls back when it fails or the commit does.
  template <typename Body>
  std::invoke_result_t<Body&> Transact(Access access, Body&& body) {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status begun = db_.ExecuteScript(BeginSql(db_.engine(), access == Access::kWrite));
        !begun.ok()) {
      // PostgreSQL's BEGIN may succeed and the writers' lock after it fail (lock_timeout, a
      // cancel): the session is then in a failed transaction that refuses every statement
      // until it is rolled back.
      db_.RollbackIfActive();
      return begun;
    }
    std::invoke_result_t<Body&> result = body();
    if (!::expanse::internal::StatusOf(result).ok()) {
      db_.RollbackIfActive();
      return result;
    }
    if (Status committed = db_.Execute("COMMIT"); !committed.ok()) {
      db_.RollbackIfActive();
      return committed;
    }
    return result;
  }

  // Runs body(), which issues exactly one SQL statement, under mu_ without BEGIN/COMMIT
  // around it. A lone statement is its own transaction and snapshot in both engines, so this
  // is Transact's guarantee for one statement, at one round trip to PostgreSQL instead of
  // three (BEGIN, the statement, COMMIT): every ingest batch authenticates with two reads and
  // is claimed and marked with two writes. A write through here must be atomic by itself
  // (an UPSERT, a conditional UPDATE), since it does not take the writers' lock.
  template <typename Body>
  std::invoke_result_t<Body&> OneStatement(Body&& body) {
    std::lock_guard<std::mutex> lock(mu_);
    return body();
  }

  // Runs body(Connection&), which issues exactly one SQL statement of the ingest batch ledger
  // (claims, marks, releases: sqlite_store_ingest_batches.cc), as OneStatement does. On
  // PostgreSQL the ledger has a connection and lock of its own, so a replica's batches are
  // never queued behind the console's reads or a job upsert, and that connection commits
  // asynchronously: a claim or mark that a crash of PostgreSQL loses makes a retry write the
  // same samples again, which the remote store keeps once, as it does after a lapsed lease
  // (docs/scaling.md), while waiting for the WAL's flush at every group would bound a
  // replica's ingest by the disk's latency. Every ledger statement finds its rows by key, and
  // the session says so to the planner (enable_seqscan off), so no plan cached while a table
  // was nearly empty scans it later. SQLite's ledger is db_ under mu_: a second
  // connection there would only add lock waits between the two.
  template <typename Body>
  std::invoke_result_t<Body&, Connection&> LedgerStatement(Body&& body) {
    if (ledger_.has_value()) {
      std::lock_guard<std::mutex> lock(ledger_mu_);
      return body(*ledger_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    return body(db_);
  }

  // The one row `sql` selects, read by `read` (returning T or Result<T>), or `not_found` when
  // there is none. Call inside a Transact body.
  template <typename T, typename Reader, typename... Args>
  Result<T> QueryOneLocked(Reader read, Status not_found, std::string_view sql,
                           const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(Statement row, db_.Query(sql, args...));
    EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
    if (!found)
      return not_found;
    return read(row);
  }

  // Runs an INSERT into a table with an `id` column and gives the new row's id (RETURNING,
  // which both engines have). Call inside a Transact body.
  template <typename... Args>
  Result<int64_t> InsertLocked(std::string_view insert_sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(Statement row,
                             db_.Query(std::string(insert_sql) + " RETURNING id", args...));
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, row.Step());
    if (!has_row)
      return InternalError("an INSERT ... RETURNING id gave no row");
    return row.ColumnInt(0);
  }

  // Lookups shared by several methods; kNotFound names the missing thing.
  Result<Organization> OrganizationByIdLocked(int64_t id);
  Result<User> UserByIdLocked(int64_t id);
  Result<Compute> ComputeByIdLocked(std::string_view id);
  Result<Credential> CredentialByIdLocked(int64_t id);
  // kNotFound naming the first of `compute_ids` that does not exist.
  Status CheckComputesExistLocked(const std::vector<std::string_view>& compute_ids);

  std::mutex mu_;
  Connection db_;  // guarded by mu_
  std::mutex ledger_mu_;
  std::optional<Connection> ledger_;  // guarded by ledger_mu_; PostgreSQL only
};

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQLITE_STORE_IMPL_H_
