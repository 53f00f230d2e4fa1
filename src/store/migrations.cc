#include "store/migrations.h"

#include <array>
#include <string>

namespace expanse::store::sqlite_internal {
namespace {

// STRICT tables (SQLite >= 3.37) make a wrongly typed value an error instead of a silent
// conversion. Times are INTEGER Unix epoch milliseconds with 0 for "unset", as in store.h.
// The CHECKs repeat the enum names of store.cc (RoleName, ComputeStateName): a new enum
// value needs a migration that rebuilds the table.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE organizations (
  id            INTEGER PRIMARY KEY,
  slug          TEXT NOT NULL UNIQUE
                CHECK (length(slug) BETWEEN 1 AND 63 AND slug NOT GLOB '*[^a-z0-9-]*'),
  name          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
  id            INTEGER PRIMARY KEY,
  email         TEXT NOT NULL UNIQUE CHECK (email <> '' AND email NOT GLOB '*[A-Z]*'),
  display_name  TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  disabled      INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1))
) STRICT;

CREATE TABLE memberships (
  org_id               INTEGER NOT NULL REFERENCES organizations (id),
  user_id              INTEGER NOT NULL REFERENCES users (id),
  role                 TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  can_register_compute INTEGER NOT NULL CHECK (can_register_compute IN (0, 1)),
  PRIMARY KEY (org_id, user_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX memberships_by_user ON memberships (user_id);

CREATE TABLE sessions (
  id_hash       TEXT PRIMARY KEY,
  user_id       INTEGER NOT NULL REFERENCES users (id),
  csrf_token    TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX sessions_by_user ON sessions (user_id);

CREATE TABLE api_tokens (
  id            INTEGER PRIMARY KEY,
  user_id       INTEGER NOT NULL REFERENCES users (id),
  org_id        INTEGER NOT NULL REFERENCES organizations (id),
  name          TEXT NOT NULL,
  token_hash    TEXT NOT NULL UNIQUE,
  scopes        TEXT NOT NULL,  -- space-separated; no scope contains a blank
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL DEFAULT 0,
  revoked_at_ms INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX api_tokens_by_user ON api_tokens (user_id);

CREATE TABLE computes (
  id                    TEXT PRIMARY KEY,
  org_id                INTEGER NOT NULL REFERENCES organizations (id),
  name                  TEXT NOT NULL,
  type                  TEXT NOT NULL,
  state                 TEXT NOT NULL
                        CHECK (state IN ('registered', 'active', 'stale', 'deprovisioned')),
  created_at_ms         INTEGER NOT NULL,
  created_by_user       INTEGER NOT NULL,  -- informational; 0 = unknown, so no REFERENCES
  pinned_daemon_version TEXT NOT NULL,
  control_plane_url     TEXT NOT NULL,
  data_plane_url        TEXT NOT NULL,
  last_heartbeat_ms     INTEGER NOT NULL DEFAULT 0,
  controller_host       TEXT NOT NULL DEFAULT '',
  daemon_version        TEXT NOT NULL DEFAULT '',
  deprovisioned_at_ms   INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX computes_by_org ON computes (org_id);
CREATE INDEX computes_by_state ON computes (state, last_heartbeat_ms);

CREATE TABLE install_tokens (
  id                INTEGER PRIMARY KEY,
  compute_id        TEXT NOT NULL REFERENCES computes (id),
  token_hash        TEXT NOT NULL UNIQUE,
  created_at_ms     INTEGER NOT NULL,
  expires_at_ms     INTEGER NOT NULL,
  used_at_ms        INTEGER NOT NULL DEFAULT 0,
  invalidated_at_ms INTEGER NOT NULL DEFAULT 0,
  created_by_user   INTEGER NOT NULL,
  -- A token is consumed at most one way: exchanged, or invalidated while unused.
  CHECK (used_at_ms = 0 OR invalidated_at_ms = 0)
) STRICT;
CREATE INDEX install_tokens_by_compute ON install_tokens (compute_id);

CREATE TABLE credentials (
  id                 INTEGER PRIMARY KEY,
  compute_id         TEXT NOT NULL REFERENCES computes (id),
  secret_hash        TEXT NOT NULL UNIQUE,
  created_at_ms      INTEGER NOT NULL,
  revoked_at_ms      INTEGER NOT NULL DEFAULT 0,
  revoke_reason      TEXT NOT NULL DEFAULT ''
                     CHECK (revoke_reason IN ('', 'replaced', 'deprovisioned')),
  first_heartbeat_ms INTEGER NOT NULL DEFAULT 0,
  hostname           TEXT NOT NULL,
  daemon_version     TEXT NOT NULL,
  slurm_version      TEXT NOT NULL,
  role               TEXT NOT NULL
) STRICT;
CREATE INDEX credentials_by_compute ON credentials (compute_id);

CREATE TABLE heartbeats (
  id              INTEGER PRIMARY KEY,
  compute_id      TEXT NOT NULL REFERENCES computes (id),
  credential_id   INTEGER NOT NULL REFERENCES credentials (id),
  received_at_ms  INTEGER NOT NULL,
  controller_host TEXT NOT NULL,
  daemon_version  TEXT NOT NULL,
  body_json       TEXT NOT NULL
) STRICT;
CREATE INDEX heartbeats_by_compute_time ON heartbeats (compute_id, received_at_ms);

CREATE TABLE audit_events (
  id          INTEGER PRIMARY KEY,
  at_ms       INTEGER NOT NULL,
  org_id      INTEGER NOT NULL,  -- 0 = no organisation, so no REFERENCES
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,
  target      TEXT NOT NULL,
  detail_json TEXT NOT NULL,
  remote_addr TEXT NOT NULL
) STRICT;
CREATE INDEX audit_events_by_time ON audit_events (at_ms);
CREATE INDEX audit_events_by_org_time ON audit_events (org_id, at_ms);
)sql";

// SLURM jobs (job_store.h). The daemon reports at least once and in any order, so none of
// these tables references another one but computes: a Prolog event or a GPU allocation may
// arrive before the job record it belongs to. Identifiers and texts are SLURM's, stored as
// given; the CHECKs hold only what every valid row satisfies whatever SLURM sends.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE jobs (
  compute_id   TEXT NOT NULL REFERENCES computes (id),
  job_id       TEXT NOT NULL CHECK (job_id <> ''),  -- "123", "123_4", "123+1"
  name         TEXT NOT NULL,
  user         TEXT NOT NULL,
  account      TEXT NOT NULL,
  partition    TEXT NOT NULL,
  state        TEXT NOT NULL,
  nodes        TEXT NOT NULL,
  submit_ms    INTEGER NOT NULL CHECK (submit_ms >= 0),
  start_ms     INTEGER NOT NULL CHECK (start_ms >= 0),
  end_ms       INTEGER NOT NULL CHECK (end_ms >= 0),  -- 0 while running
  req_nodes    INTEGER NOT NULL CHECK (req_nodes >= 0),
  req_cpus     INTEGER NOT NULL CHECK (req_cpus >= 0),
  req_gpus     INTEGER NOT NULL CHECK (req_gpus >= 0),
  req_mem_mib  INTEGER NOT NULL CHECK (req_mem_mib >= 0),
  time_limit_s INTEGER NOT NULL CHECK (time_limit_s >= 0),  -- 0 = unlimited
  observed_ms  INTEGER NOT NULL CHECK (observed_ms >= 0),
  -- A job cancelled while pending has an end but no start.
  CHECK (start_ms = 0 OR end_ms = 0 OR end_ms >= start_ms),
  PRIMARY KEY (compute_id, job_id)
) STRICT;
CREATE INDEX jobs_by_compute_start ON jobs (compute_id, start_ms);
CREATE INDEX jobs_by_compute_user ON jobs (compute_id, user);
CREATE INDEX jobs_by_compute_state ON jobs (compute_id, state);
CREATE INDEX jobs_by_compute_account ON jobs (compute_id, account);
CREATE INDEX jobs_by_compute_partition ON jobs (compute_id, partition);

CREATE TABLE job_node_events (
  compute_id TEXT NOT NULL REFERENCES computes (id),
  job_id     TEXT NOT NULL CHECK (job_id <> ''),
  host       TEXT NOT NULL CHECK (host <> ''),
  kind       TEXT NOT NULL CHECK (kind IN ('start', 'end')),
  at_ms      INTEGER NOT NULL CHECK (at_ms > 0),
  UNIQUE (compute_id, job_id, host, kind)
) STRICT;

CREATE TABLE gpu_allocations (
  compute_id TEXT NOT NULL REFERENCES computes (id),
  job_id     TEXT NOT NULL CHECK (job_id <> ''),
  host       TEXT NOT NULL CHECK (host <> ''),
  gpu_uuid   TEXT NOT NULL CHECK (gpu_uuid <> ''),
  gpu_index  INTEGER NOT NULL CHECK (gpu_index >= -1),  -- -1 unknown
  gpu_minor  INTEGER NOT NULL CHECK (gpu_minor >= -1),  -- -1 unknown
  from_ms    INTEGER NOT NULL CHECK (from_ms > 0),
  to_ms      INTEGER NOT NULL CHECK (to_ms = 0 OR to_ms >= from_ms),  -- 0 = still allocated
  UNIQUE (compute_id, job_id, host, gpu_uuid)
) STRICT;
CREATE INDEX gpu_allocations_by_host_time ON gpu_allocations (compute_id, host, from_ms);
)sql";

// Python stacks of jobs, folded and counted per daemon aggregation window (job_store.h). A
// window's count is final, so a redelivery replaces it; the UNIQUE key is what makes that an
// upsert. length(CAST(... AS BLOB)) counts bytes, as kMaxFoldedStackBytes does.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE job_stacks (
  compute_id      TEXT NOT NULL REFERENCES computes (id),
  job_id          TEXT NOT NULL CHECK (job_id <> ''),
  host            TEXT NOT NULL CHECK (host <> ''),
  window_start_ms INTEGER NOT NULL CHECK (window_start_ms > 0),
  window_end_ms   INTEGER NOT NULL CHECK (window_end_ms > window_start_ms),
  folded          TEXT NOT NULL
                  CHECK (folded <> '' AND length(CAST(folded AS BLOB)) <= 16384),
  thread_state    TEXT NOT NULL CHECK (thread_state IN ('', 'gil', 'running', 'idle')),
  count           INTEGER NOT NULL CHECK (count BETWEEN 1 AND 1000000000),
  gpu_idle        INTEGER NOT NULL CHECK (gpu_idle IN (0, 1)),
  UNIQUE (compute_id, job_id, host, window_start_ms, folded, thread_state, gpu_idle)
) STRICT;
CREATE INDEX job_stacks_by_job_window ON job_stacks (compute_id, job_id, window_start_ms);
)sql";

// The job list's order (ListJobs: newest start first, pending jobs by submit time, then job id)
// as an index, so that a page is read in order instead of sorting every job of the compute.
// VIRTUAL because ALTER TABLE cannot add a STORED column; the index stores the value, and SQLite
// keeps both in step with start_ms and submit_ms on every write.
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE jobs ADD COLUMN sort_ms INTEGER
  GENERATED ALWAYS AS (CASE WHEN start_ms = 0 THEN submit_ms ELSE start_ms END) VIRTUAL;
CREATE INDEX jobs_by_compute_sort ON jobs (compute_id, sort_ms DESC, job_id);
)sql";

// Alert rules and their deliveries (docs/formats/alerts.md). UNIQUE (rule_id, subject) is the
// deduplication: a message about a job (or a user's digest of a period) is claimed by one
// INSERT, which also holds between replicas sharing the database.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE alert_rules (
  id             INTEGER PRIMARY KEY,
  org_id         INTEGER NOT NULL REFERENCES organizations (id),
  name           TEXT NOT NULL CHECK (name <> '' AND length(name) <= 64),
  kind           TEXT NOT NULL CHECK (kind IN ('verdict', 'digest')),
  verdict        TEXT NOT NULL CHECK ((kind = 'verdict') = (verdict <> '') AND length(verdict) <= 32),
  min_duration_s INTEGER NOT NULL CHECK (min_duration_s BETWEEN 0 AND 604800),
  period_s       INTEGER NOT NULL
                 CHECK ((kind = 'digest' AND period_s BETWEEN 60 AND 2678400) OR
                        (kind = 'verdict' AND period_s = 0)),
  channel        TEXT NOT NULL CHECK (channel IN ('webhook', 'email')),
  target         TEXT NOT NULL CHECK (target <> '' AND length(target) <= 2048),
  max_per_hour   INTEGER NOT NULL CHECK (max_per_hour BETWEEN 1 AND 10000),
  action         TEXT NOT NULL CHECK (action IN ('', 'scancel')),
  action_grace_s INTEGER NOT NULL CHECK (action_grace_s BETWEEN 0 AND 86400),
  action_dry_run INTEGER NOT NULL CHECK (action_dry_run IN (0, 1)),
  enabled        INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  created_by     TEXT NOT NULL,
  created_at_ms  INTEGER NOT NULL
) STRICT;
CREATE INDEX alert_rules_by_org ON alert_rules (org_id, id);
CREATE TABLE alert_deliveries (
  id            INTEGER PRIMARY KEY,
  rule_id       INTEGER NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
  org_id        INTEGER NOT NULL,
  subject       TEXT NOT NULL CHECK (subject <> '' AND length(subject) <= 256),
  compute_id    TEXT NOT NULL,
  job_id        TEXT NOT NULL,
  user          TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed', 'throttled', 'retry')),
  attempts      INTEGER NOT NULL CHECK (attempts >= 0),
  last_error    TEXT NOT NULL,
  summary       TEXT NOT NULL CHECK (length(summary) <= 1024),
  message       TEXT NOT NULL CHECK (length(CAST(message AS BLOB)) <= 65536),
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  UNIQUE (rule_id, subject)
) STRICT;
CREATE INDEX alert_deliveries_by_org ON alert_deliveries (org_id, updated_at_ms DESC, id DESC);
CREATE INDEX alert_deliveries_by_rule_state ON alert_deliveries (rule_id, state, updated_at_ms);
)sql";

// What the server asks of a compute's controller (an alert rule's scancel), carried in
// heartbeat answers until the controller reports the outcome. One per (compute, kind, job).
constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE compute_requests (
  id            INTEGER PRIMARY KEY,
  compute_id    TEXT NOT NULL REFERENCES computes (id),
  org_id        INTEGER NOT NULL,
  kind          TEXT NOT NULL CHECK (kind IN ('scancel')),
  job_id        TEXT NOT NULL CHECK (job_id <> '' AND length(job_id) <= 64),
  reason        TEXT NOT NULL CHECK (length(reason) <= 512),
  rule_id       INTEGER NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
  result        TEXT NOT NULL CHECK (length(result) <= 512),
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  UNIQUE (compute_id, kind, job_id)
) STRICT;
CREATE INDEX compute_requests_by_state ON compute_requests (compute_id, state, id);
)sql";

// v7: the SLURM user name a member's jobs run under, for API tokens limited to their own jobs
// (scope jobs:own); '' = none set.
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE memberships ADD COLUMN slurm_user TEXT NOT NULL DEFAULT ''
  CHECK (length(slurm_user) <= 64);
)sql";

// v8: ingest batches whose samples went to a remote telemetry store, so that every replica
// stores each batch once (JobStore::ClaimIngestBatch). stored_at_ms 0: claimed, not stored.
constexpr const char* kSchemaV8 = R"sql(
CREATE TABLE ingest_batches (
  batch_id      TEXT PRIMARY KEY CHECK (batch_id <> '' AND length(batch_id) <= 256),
  compute_id    TEXT NOT NULL,
  claimed_at_ms INTEGER NOT NULL,
  stored_at_ms  INTEGER NOT NULL
) STRICT;
CREATE INDEX ingest_batches_by_claim ON ingest_batches (claimed_at_ms);
)sql";

// The capture agent's per-process window aggregates (job_store.h, CaptureWindow): the document
// as the daemon sent it, keyed by its process and window, so a redelivery replaces it.
constexpr const char* kSchemaV9 = R"sql(
CREATE TABLE capture_windows (
  compute_id      TEXT NOT NULL REFERENCES computes (id),
  job_id          TEXT NOT NULL CHECK (job_id <> ''),
  host            TEXT NOT NULL CHECK (host <> ''),
  pid             INTEGER NOT NULL CHECK (pid > 0),
  window_start_ms INTEGER NOT NULL CHECK (window_start_ms > 0),
  window_end_ms   INTEGER NOT NULL CHECK (window_end_ms > window_start_ms),
  doc             TEXT NOT NULL CHECK (length(CAST(doc AS BLOB)) BETWEEN 2 AND 131072),
  UNIQUE (compute_id, job_id, host, pid, window_start_ms)
) STRICT;
CREATE INDEX capture_windows_by_job ON capture_windows (compute_id, job_id, window_start_ms);
)sql";

// The capture agent's trace segments (job_store.h, TraceSegmentRecord): what the console lists;
// the bytes are in the segment store under (compute_id, sha256).
constexpr const char* kSchemaV10 = R"sql(
CREATE TABLE trace_segments (
  compute_id      TEXT NOT NULL REFERENCES computes (id),
  sha256          TEXT NOT NULL CHECK (length(sha256) = 64),
  job_id          TEXT NOT NULL CHECK (job_id <> ''),
  host            TEXT NOT NULL CHECK (host <> ''),
  pid             INTEGER NOT NULL CHECK (pid > 0),
  window_start_ms INTEGER NOT NULL CHECK (window_start_ms > 0),
  window_end_ms   INTEGER NOT NULL CHECK (window_end_ms > window_start_ms),
  trigger_id      TEXT NOT NULL CHECK (trigger_id <> ''),
  trigger_reason  TEXT NOT NULL CHECK (trigger_reason <> ''),
  bytes           INTEGER NOT NULL CHECK (bytes > 0),
  events          INTEGER NOT NULL CHECK (events >= 0),
  received_ms     INTEGER NOT NULL CHECK (received_ms > 0),
  PRIMARY KEY (compute_id, sha256)
) STRICT;
CREATE INDEX trace_segments_by_job ON trace_segments (compute_id, job_id, window_start_ms);
CREATE INDEX trace_segments_by_age ON trace_segments (received_ms);
)sql";

// A segment's PC sampling summary (TraceSegmentRecord::pc_sampling): "" for segments from
// before it and for windows that did not sample.
constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE trace_segments ADD COLUMN pc_sampling TEXT NOT NULL DEFAULT ''
  CHECK (length(pc_sampling) <= 4096);
)sql";

// Heartbeat history is kept for a day before each compute's newest (RecordHeartbeat deletes
// what falls out of it). Until now nothing was deleted: the backlog goes here, once, while
// the store is being opened, rather than in the first heartbeat's request. (PostgreSQL also
// re-keys job_stacks here, kPgSchemaV12; SQLite's index entries are not bounded, so its
// job_stacks keep the stack itself in their key.)
constexpr const char* kSchemaV12 = R"sql(
DELETE FROM heartbeats WHERE received_at_ms <
  (SELECT max(newest.received_at_ms) FROM heartbeats AS newest
    WHERE newest.compute_id = heartbeats.compute_id) - 86400000;
)sql";

// Stack retention (ExpireStacks) deletes the oldest windows first, in batches: by this index,
// not by reading the whole table.
constexpr const char* kSchemaV13 = R"sql(
CREATE INDEX IF NOT EXISTS job_stacks_by_window_end ON job_stacks (window_end_ms);
)sql";

}  // namespace

// pg_migrations.cc
extern const char* const kPgSchemaV1;
extern const char* const kPgSchemaV2;
extern const char* const kPgSchemaV3;
extern const char* const kPgSchemaV4;
extern const char* const kPgSchemaV5;
extern const char* const kPgSchemaV6;
extern const char* const kPgSchemaV7;
extern const char* const kPgSchemaV8;
extern const char* const kPgSchemaV9;
extern const char* const kPgSchemaV10;
extern const char* const kPgSchemaV11;
extern const char* const kPgSchemaV12;
extern const char* const kPgSchemaV13;

namespace {

const std::array<Migration, 13> kMigrations = {{
    {1, kSchemaV1, kPgSchemaV1},
    {2, kSchemaV2, kPgSchemaV2},
    {3, kSchemaV3, kPgSchemaV3},
    {4, kSchemaV4, kPgSchemaV4},
    {5, kSchemaV5, kPgSchemaV5},
    {6, kSchemaV6, kPgSchemaV6},
    {7, kSchemaV7, kPgSchemaV7},
    {8, kSchemaV8, kPgSchemaV8},
    {9, kSchemaV9, kPgSchemaV9},
    {10, kSchemaV10, kPgSchemaV10},
    {11, kSchemaV11, kPgSchemaV11},
    {12, kSchemaV12, kPgSchemaV12},
    {13, kSchemaV13, kPgSchemaV13},
}};

// applied_at_ms comes from SQLite's clock rather than an injected one: it is a note for
// the operator reading the table, and no logic reads it back.
constexpr const char* kCreateMigrationsTable = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version       INTEGER PRIMARY KEY,
  applied_at_ms INTEGER NOT NULL
) STRICT;
)sql";
constexpr const char* kPgCreateMigrationsTable = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version       BIGINT PRIMARY KEY,
  applied_at_ms BIGINT NOT NULL
);
)sql";

constexpr std::string_view kRecordMigration =
    "INSERT INTO schema_migrations (version, applied_at_ms) "
    "VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))";
constexpr std::string_view kPgRecordMigration =
    "INSERT INTO schema_migrations (version, applied_at_ms) "
    "VALUES (?1, CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT))";

Status CheckNotNewer(int version) {
  if (version > LatestSchemaVersion()) {
    return FailedPreconditionError("database schema version " + std::to_string(version) +
                                   " is newer than this expanse-server supports (" +
                                   std::to_string(LatestSchemaVersion()) +
                                   "); upgrade expanse-server");
  }
  return OkStatus();
}

// Runs inside an open transaction; the caller commits or rolls back.
Status ApplyOneLocked(Connection& db, const Migration& migration) {
  EXPANSE_ASSIGN_OR_RETURN(const int version, SchemaVersion(db));
  EXPANSE_RETURN_IF_ERROR(CheckNotNewer(version));
  if (version >= migration.version) {
    return OkStatus();  // another process got there first
  }
  if (version != migration.version - 1) {
    return DataLossError("database schema version " + std::to_string(version) +
                         " cannot be followed by migration " + std::to_string(migration.version) +
                         "; the schema_migrations table is damaged");
  }
  const bool sqlite = db.engine() == Engine::kSqlite;
  if (Status applied = db.ExecuteScript(sqlite ? migration.sql : migration.postgres_sql);
      !applied.ok()) {
    return Status(applied.code(), "schema migration " + std::to_string(migration.version) +
                                      " failed: " + applied.message());
  }
  return db.Execute(sqlite ? kRecordMigration : kPgRecordMigration, int64_t{migration.version});
}

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

int LatestSchemaVersion() { return kMigrations.back().version; }

Result<int> SchemaVersion(Connection& db) {
  EXPANSE_ASSIGN_OR_RETURN(
      Statement exists,
      db.Query(db.engine() == Engine::kSqlite
                   ? "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1"
                   : "SELECT count(*) FROM information_schema.tables "
                     "WHERE table_schema = current_schema() AND table_name = ?1",
               std::string_view("schema_migrations")));
  EXPANSE_ASSIGN_OR_RETURN(const bool has_row, exists.Step());
  if (!has_row || exists.ColumnInt(0) == 0) {
    return 0;
  }
  EXPANSE_ASSIGN_OR_RETURN(Statement max_version,
                           db.Query("SELECT coalesce(max(version), 0) FROM schema_migrations"));
  EXPANSE_ASSIGN_OR_RETURN(const bool has_max, max_version.Step());
  return has_max ? static_cast<int>(max_version.ColumnInt(0)) : 0;
}

Status ApplyMigrations(Connection& db) {
  // Checked before anything is written, so a newer database is left exactly as it was and
  // an up-to-date one is only read.
  EXPANSE_ASSIGN_OR_RETURN(const int initial_version, SchemaVersion(db));
  EXPANSE_RETURN_IF_ERROR(CheckNotNewer(initial_version));
  for (const Migration& migration : kMigrations) {
    if (migration.version <= initial_version) {
      continue;
    }
    // The store's writer lock: two servers starting at once apply each migration once. On
    // PostgreSQL the wait for it is not bounded by the session's lock_timeout: a server
    // starting beside one that is migrating waits for that migration, however long; nor is
    // the migration by its statement_timeout (a large table's rewrite takes what it takes).
    Status status = db.ExecuteScript(
        db.engine() == Engine::kSqlite
            ? BeginSql(db.engine(), /*write=*/true)
            : std::string("BEGIN; SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0; ") +
                  kPgWritersLockSql);
    if (status.ok()) {
      status = db.ExecuteScript(db.engine() == Engine::kSqlite ? kCreateMigrationsTable
                                                               : kPgCreateMigrationsTable);
    }
    if (status.ok()) {
      status = ApplyOneLocked(db, migration);
    }
    if (status.ok()) {
      status = db.ExecuteScript("COMMIT");
    }
    if (!status.ok()) {
      db.RollbackIfActive();
      return status;
    }
  }
  return OkStatus();
}

}  // namespace expanse::store::sqlite_internal
