// The exactly-once record of ingest batches stored in a remote telemetry store: one row per
// batch id, claimed by the replica that writes its samples, marked once the remote store
// accepted them (docs/scaling.md, "Telemetry in a cluster store").
#include <string>

#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {

namespace {

// The batch id is the sender's idempotency key (compute, stream, sequence); the ingest
// handler makes it, but it is checked here too since the table's key is only as good as it.
constexpr size_t kMaxBatchIdBytes = 256;

Status ValidateBatchId(std::string_view batch_id) {
  if (batch_id.empty() || batch_id.size() > kMaxBatchIdBytes) {
    return InvalidArgumentError("batch_id must be 1 to " + std::to_string(kMaxBatchIdBytes) +
                                " bytes");
  }
  return OkStatus();
}

}  // namespace

Result<JobStore::BatchClaim> SqliteStore::ClaimIngestBatch(std::string_view compute_id,
                                                           std::string_view batch_id,
                                                           int64_t now_ms, int64_t lease_ms) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatchId(batch_id));
  if (compute_id.empty())
    return InvalidArgumentError("compute_id must not be empty");
  if (now_ms < 0 || lease_ms <= 0)
    return InvalidArgumentError("now_ms must be >= 0 and lease_ms > 0");
  // One atomic statement in both engines (an UPSERT): a new batch id is claimed; a known
  // one is taken over only when it was never stored and its holder's claim has lapsed (the
  // holder died: this caller writes the samples again, and the remote store keeps one sample
  // per series and timestamp, so a half-written first attempt does no harm).
  EXPANSE_ASSIGN_OR_RETURN(
      const bool claimed, OneStatement([&]() -> Result<bool> {
        EXPANSE_ASSIGN_OR_RETURN(
            Statement row,
            db_.Query(
                "INSERT INTO ingest_batches (batch_id, compute_id, claimed_at_ms, "
                "stored_at_ms) VALUES (?1, ?2, ?3, 0) ON CONFLICT (batch_id) DO UPDATE SET "
                "claimed_at_ms = excluded.claimed_at_ms WHERE ingest_batches.stored_at_ms = 0 "
                "AND excluded.claimed_at_ms - ingest_batches.claimed_at_ms >= ?4 "
                "RETURNING claimed_at_ms",
                batch_id, compute_id, now_ms, lease_ms));
        return row.Step();
      }));
  if (claimed)
    return BatchClaim::kClaimed;
  // Not claimed: stored already, or held by a live claim (also when the holder released it
  // between the two statements: the sender asks again later).
  return OneStatement([&]() -> Result<BatchClaim> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement row,
        db_.Query("SELECT stored_at_ms FROM ingest_batches WHERE batch_id = ?1", batch_id));
    EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
    return found && row.ColumnInt(0) > 0 ? BatchClaim::kStored : BatchClaim::kInFlight;
  });
}

Status SqliteStore::MarkIngestBatchStored(std::string_view batch_id, int64_t now_ms) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatchId(batch_id));
  return OneStatement([&]() -> Status {
    // At least 1: 0 means "not stored yet" in the table.
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE ingest_batches SET stored_at_ms = ?2 WHERE batch_id = ?1", batch_id,
                    now_ms > 0 ? now_ms : int64_t{1}));
    if (db_.Changes() == 0)
      return NotFoundError("ingest batch " + std::string(batch_id) + " was never claimed");
    return OkStatus();
  });
}

Status SqliteStore::ReleaseIngestBatch(std::string_view batch_id) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatchId(batch_id));
  return Transact(Access::kWrite, [&]() -> Status {
    return db_.Execute("DELETE FROM ingest_batches WHERE batch_id = ?1 AND stored_at_ms = 0",
                       batch_id);
  });
}

Result<int64_t> SqliteStore::ForgetIngestBatches(int64_t before_ms) {
  return Transact(Access::kWrite, [&]() -> Result<int64_t> {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("DELETE FROM ingest_batches WHERE claimed_at_ms < ?1", before_ms));
    return db_.Changes();
  });
}

}  // namespace expanse::store::sqlite_internal
