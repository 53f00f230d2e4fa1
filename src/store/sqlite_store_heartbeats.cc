// SqliteStore: heartbeats and the compute lifecycle they drive (active, stale,
// deprovisioned).
#include <limits>
#include <string>

#include "store/message_text.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

using store_internal::IdForMessage;

}  // namespace

Status SqliteStore::RecordHeartbeat(const Heartbeat& heartbeat) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_ASSIGN_OR_RETURN(const Compute compute, ComputeByIdLocked(heartbeat.compute_id));
    if (compute.state == ComputeState::kDeprovisioned) {
      return FailedPreconditionError("compute " + IdForMessage(compute.id) + " is deprovisioned");
    }
    // The caller authenticated the credential before this transaction; checking again here
    // closes the window in which an exchange replaced it.
    EXPANSE_ASSIGN_OR_RETURN(const Credential credential,
                             CredentialByIdLocked(heartbeat.credential_id));
    if (credential.compute_id != compute.id) {
      return PermissionDeniedError("credential " + std::to_string(credential.id) +
                                   " does not belong to compute " + IdForMessage(compute.id));
    }
    if (credential.revoked_at_ms != 0) {
      return UnauthenticatedError("credential " + std::to_string(credential.id) +
                                  " has been revoked (" + credential.revoke_reason + ")");
    }
    // A compute's daemon sends one every 30 s; one that sends them as fast as the rate limit
    // lets it (hundreds a second, up to 8 MiB each) must not fill the disk. The rows before
    // the newest stay kMinHeartbeatSpacingMs apart: a newest row within that of the one
    // before it is only the latest word, and a newer heartbeat replaces it.
    EXPANSE_RETURN_IF_ERROR(db_.Execute(
        "UPDATE heartbeats SET credential_id = ?2, received_at_ms = ?3, controller_host = ?4, "
        "daemon_version = ?5, body_json = ?6 WHERE id = (SELECT id FROM heartbeats WHERE "
        "compute_id = ?1 ORDER BY received_at_ms DESC, id DESC LIMIT 1) "
        "AND received_at_ms <= ?3 AND EXISTS (SELECT 1 FROM heartbeats AS earlier WHERE "
        "earlier.compute_id = ?1 AND earlier.id <> heartbeats.id AND earlier.received_at_ms <= "
        "heartbeats.received_at_ms AND earlier.received_at_ms > heartbeats.received_at_ms - ?7)",
        heartbeat.compute_id, heartbeat.credential_id, heartbeat.received_at_ms,
        heartbeat.controller_host, heartbeat.daemon_version, heartbeat.body_json,
        kMinHeartbeatSpacingMs));
    if (db_.Changes() == 0) {
      // The newest until now becomes history: a large body (a site's every node report, or a
      // hostile one) is kept only while it is the newest, its size said in its place.
      EXPANSE_RETURN_IF_ERROR(db_.Execute(
          std::string("UPDATE heartbeats SET body_json = '{\"omitted_bytes\":' || ") +
              (db_.engine() == Engine::kSqlite ? "length(CAST(body_json AS BLOB))"
                                               : "octet_length(body_json)") +
              " || '}' WHERE id = (SELECT id FROM heartbeats WHERE compute_id = ?1 ORDER BY "
              "received_at_ms DESC, id DESC LIMIT 1) AND received_at_ms <= ?2 AND " +
              (db_.engine() == Engine::kSqlite ? "length(CAST(body_json AS BLOB))"
                                               : "octet_length(body_json)") +
              " > ?3",
          heartbeat.compute_id, heartbeat.received_at_ms, kMaxHistoryHeartbeatBytes));
      EXPANSE_RETURN_IF_ERROR(db_.Execute(
          "INSERT INTO heartbeats (compute_id, credential_id, received_at_ms, controller_host, "
          "daemon_version, body_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          heartbeat.compute_id, heartbeat.credential_id, heartbeat.received_at_ms,
          heartbeat.controller_host, heartbeat.daemon_version, heartbeat.body_json));
    }
    // The compute's copy of the host facts follows the newest heartbeat by received time
    // (the one LatestHeartbeat returns), so a late-arriving older one cannot roll them back.
    // Right-hand sides of an UPDATE see the row as it was before it.
    EXPANSE_RETURN_IF_ERROR(db_.Execute(
        "UPDATE computes SET "
        "state = CASE WHEN state IN ('registered', 'stale') THEN 'active' ELSE state END, "
        "controller_host = CASE WHEN ?2 >= last_heartbeat_ms THEN ?3 ELSE controller_host END, "
        "daemon_version = CASE WHEN ?2 >= last_heartbeat_ms THEN ?4 ELSE daemon_version END, "
        "last_heartbeat_ms = CASE WHEN ?2 > last_heartbeat_ms THEN ?2 ELSE last_heartbeat_ms END "
        "WHERE id = ?1",
        heartbeat.compute_id, heartbeat.received_at_ms, heartbeat.controller_host,
        heartbeat.daemon_version));
    EXPANSE_RETURN_IF_ERROR(db_.Execute(
        "UPDATE credentials SET first_heartbeat_ms = ?2 WHERE id = ?1 AND first_heartbeat_ms = 0",
        heartbeat.credential_id, heartbeat.received_at_ms));
    // Nothing reads a compute's history but the operator, and each heartbeat carries every
    // node's report: without a bound the table grows by gigabytes a day at a large site
    // (docs/scaling.md). By the newest stored, so a late older heartbeat deletes nothing new.
    return db_.Execute(
        "DELETE FROM heartbeats WHERE compute_id = ?1 AND received_at_ms < "
        "(SELECT max(received_at_ms) FROM heartbeats WHERE compute_id = ?1) - ?2",
        heartbeat.compute_id, kHeartbeatHistoryMs);
  });
}

Result<Heartbeat> SqliteStore::LatestHeartbeat(std::string_view compute_id) {
  return Transact(Access::kRead, [&]() -> Result<Heartbeat> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    // Ties on received_at_ms go to the row stored last.
    return QueryOneLocked<Heartbeat>(
        ReadHeartbeat,
        NotFoundError("compute " + IdForMessage(compute_id) + " has sent no heartbeat"),
        SelectSql(kHeartbeatColumns,
                  "heartbeats WHERE compute_id = ?1 "
                  "ORDER BY received_at_ms DESC, id DESC LIMIT 1"),
        compute_id);
  });
}

Result<int> SqliteStore::MarkStaleComputes(int64_t cutoff_ms) {
  return Transact(Access::kWrite, [&]() -> Result<int> {
    EXPANSE_RETURN_IF_ERROR(db_.Execute(
        "UPDATE computes SET state = 'stale' WHERE state = 'active' AND last_heartbeat_ms < ?1",
        cutoff_ms));
    const int64_t changed = db_.Changes();
    return changed > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                                     : static_cast<int>(changed);
  });
}

Status SqliteStore::DeprovisionCompute(std::string_view compute_id, int64_t now_ms) {
  // Idempotent: every statement only touches rows not yet in their final state, so a second
  // call changes nothing and keeps the first call's times.
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE computes SET state = 'deprovisioned', deprovisioned_at_ms = ?2 "
                    "WHERE id = ?1 AND state <> 'deprovisioned'",
                    compute_id, now_ms));
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE credentials SET revoked_at_ms = ?2, revoke_reason = 'deprovisioned' "
                    "WHERE compute_id = ?1 AND revoked_at_ms = 0",
                    compute_id, now_ms));
    return db_.Execute(
        "UPDATE install_tokens SET invalidated_at_ms = ?2 "
        "WHERE compute_id = ?1 AND used_at_ms = 0 AND invalidated_at_ms = 0",
        compute_id, now_ms);
  });
}

}  // namespace expanse::store::sqlite_internal
