// The exactly-once record of ingest batches stored in a remote telemetry store: one row per
// batch id, claimed by the replica that writes its samples, marked once the remote store
// accepted them (docs/scaling.md, "Telemetry in a cluster store").
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {

namespace {

// The batch id is the sender's idempotency key (compute, stream, sequence); the ingest
// handler makes it, but it is checked here too since the table's key is only as good as it.
Status ValidateBatchId(std::string_view batch_id) {
  constexpr size_t kMaxBatchIdBytes = JobStore::kMaxBatchIdBytes;
  if (batch_id.empty() || batch_id.size() > kMaxBatchIdBytes) {
    return InvalidArgumentError("batch_id must be 1 to " + std::to_string(kMaxBatchIdBytes) +
                                " bytes");
  }
  return OkStatus();
}

// A statement names at most this many batches (a replica's group is far smaller); SQLite
// takes 32,766 parameters, PostgreSQL 65,535.
constexpr size_t kMaxBatchesPerCall = 1000;

Status ValidateBatchIds(const std::vector<std::string_view>& batch_ids) {
  if (batch_ids.empty() || batch_ids.size() > kMaxBatchesPerCall) {
    return InvalidArgumentError("a call names 1 to " + std::to_string(kMaxBatchesPerCall) +
                                " ingest batches, not " + std::to_string(batch_ids.size()));
  }
  std::set<std::string_view> seen;
  for (const std::string_view id : batch_ids) {
    EXPANSE_RETURN_IF_ERROR(ValidateBatchId(id));
    if (!seen.insert(id).second)
      return InvalidArgumentError("ingest batch " + std::string(id) + " is named twice");
  }
  return OkStatus();
}

// "?first, ?first+1, ..." for `count` parameters.
std::string Placeholders(int first, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      out += ", ";
    out += "?" + std::to_string(first + static_cast<int>(i));
  }
  return out;
}

// Binds the texts to ?first, ?first+1, ...
Status BindTexts(Statement& statement, int first, const std::vector<std::string_view>& ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    EXPANSE_RETURN_IF_ERROR(statement.Bind(first + static_cast<int>(i), ids[i]));
  return OkStatus();
}

// Marks batches stored at ?first. On PostgreSQL the ids are one array parameter, ?first+1, so
// that the statement's text, prepared once per session, is the same for any number of them
// (the claim that carries marks differs only by its own batches' count); on SQLite they are
// ?first+1 ... ?first+count. BindMarks binds them.
std::string MarkSql(Engine engine, int first, size_t count) {
  const std::string ids = engine == Engine::kPostgres
                              ? "= ANY(?" + std::to_string(first + 1) + "::text[])"
                              : "IN (" + Placeholders(first + 1, count) + ")";
  return "UPDATE ingest_batches SET stored_at_ms = ?" + std::to_string(first) + " WHERE batch_id " +
         ids;
}

// A PostgreSQL array literal of the texts, each quoted ("a\"b" for a"b).
std::string TextArray(const std::vector<std::string_view>& texts) {
  std::string out = "{";
  for (const std::string_view text : texts) {
    if (out.size() > 1)
      out += ',';
    out += '"';
    for (const char c : text) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// Binds MarkSql's parameters: the time and the ids.
Status BindMarks(Statement& statement, Engine engine, int first, int64_t stored_at_ms,
                 const std::vector<std::string_view>& ids) {
  EXPANSE_RETURN_IF_ERROR(statement.Bind(first, stored_at_ms));
  if (engine == Engine::kPostgres)
    return statement.Bind(first + 1, TextArray(ids));
  return BindTexts(statement, first + 1, ids);
}

}  // namespace

Result<std::vector<JobStore::BatchClaim>> SqliteStore::MarkAndClaimIngestBatches(
    const std::vector<std::string_view>& to_mark, const std::vector<BatchToClaim>& batches,
    int64_t now_ms, int64_t lease_ms) {
  std::vector<std::string_view> ids;
  ids.reserve(batches.size());
  for (const BatchToClaim& b : batches) {
    if (b.compute_id.empty())
      return InvalidArgumentError("compute_id must not be empty");
    ids.push_back(b.batch_id);
  }
  // Distinct across both lists: one statement must not change a row twice.
  std::vector<std::string_view> named = ids;
  named.insert(named.end(), to_mark.begin(), to_mark.end());
  if (batches.empty())
    return InvalidArgumentError("a claim names at least one ingest batch");
  EXPANSE_RETURN_IF_ERROR(ValidateBatchIds(named));
  if (now_ms < 0 || lease_ms <= 0)
    return InvalidArgumentError("now_ms must be >= 0 and lease_ms > 0");
  // One atomic statement in both engines (an UPSERT of every row): a new batch id is claimed;
  // a known one is taken over only when it was never stored and its holder's claim has lapsed
  // (the holder died: this caller writes the samples again, and the remote store keeps one
  // sample per series and timestamp, so a half-written first attempt does no harm).
  // A row that names a credential is inserted only while that credential is live and its
  // compute's (VALUES' columns are column1, column2, column3 in both engines).
  std::string values;
  for (size_t i = 0; i < batches.size(); ++i) {
    const int first = 3 + 3 * static_cast<int>(i);
    values += (i > 0 ? ", (?" : "(?") + std::to_string(first) + ", ?" + std::to_string(first + 1) +
              ", ?" + std::to_string(first + 2) + ")";
  }
  // The marks: on PostgreSQL an UPDATE in the claim's WITH clause, so both take one round trip
  // and one commit (the two touch distinct rows); SQLite has no data-modifying WITH and no
  // round trips to save, so there it is a statement of its own just before the claim.
  const bool mark_in_claim = !to_mark.empty() && db_.engine() == Engine::kPostgres;
  const int first_mark = mark_in_claim ? 3 + 3 * static_cast<int>(batches.size()) : 1;
  // At least 1: 0 means "not stored yet" in the table.
  const int64_t stored_at_ms = now_ms > 0 ? now_ms : 1;
  return LedgerStatement([&](Connection& db) -> Result<std::vector<BatchClaim>> {
    if (!to_mark.empty() && !mark_in_claim) {
      EXPANSE_ASSIGN_OR_RETURN(Statement mark,
                               db.Prepare(MarkSql(db.engine(), first_mark, to_mark.size())));
      EXPANSE_RETURN_IF_ERROR(BindMarks(mark, db.engine(), first_mark, stored_at_ms, to_mark));
      EXPANSE_RETURN_IF_ERROR(mark.Run());
    }
    std::set<std::string, std::less<>> claimed;
    {
      EXPANSE_ASSIGN_OR_RETURN(
          Statement rows,
          db.Prepare((mark_in_claim ? "WITH marked AS (" +
                                          MarkSql(db.engine(), first_mark, to_mark.size()) + ") "
                                    : std::string()) +
                     "INSERT INTO ingest_batches (batch_id, compute_id, claimed_at_ms, "
                     "stored_at_ms) SELECT v.column1, v.column2, ?1, 0 FROM (VALUES " +
                     values +
                     ") AS v WHERE v.column3 = '' OR EXISTS (SELECT 1 FROM credentials cr "
                     "WHERE cr.secret_hash = v.column3 AND cr.compute_id = v.column2 AND "
                     "cr.revoked_at_ms = 0) ON CONFLICT (batch_id) DO UPDATE SET claimed_at_ms = "
                     "excluded.claimed_at_ms WHERE ingest_batches.stored_at_ms = 0 AND "
                     "excluded.claimed_at_ms - ingest_batches.claimed_at_ms >= ?2 "
                     "RETURNING batch_id"));
      EXPANSE_RETURN_IF_ERROR(rows.Bind(1, now_ms));
      EXPANSE_RETURN_IF_ERROR(rows.Bind(2, lease_ms));
      for (size_t i = 0; i < batches.size(); ++i) {
        const int first = 3 + 3 * static_cast<int>(i);
        EXPANSE_RETURN_IF_ERROR(rows.Bind(first, batches[i].batch_id));
        EXPANSE_RETURN_IF_ERROR(rows.Bind(first + 1, batches[i].compute_id));
        EXPANSE_RETURN_IF_ERROR(rows.Bind(first + 2, batches[i].credential_hash));
      }
      if (mark_in_claim)
        EXPANSE_RETURN_IF_ERROR(BindMarks(rows, db.engine(), first_mark, stored_at_ms, to_mark));
      while (true) {
        EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
        if (!has_row)
          break;
        claimed.insert(rows.ColumnText(0));
      }
    }
    std::vector<BatchClaim> claims(batches.size(), BatchClaim::kClaimed);
    if (claimed.size() == batches.size())
      return claims;
    // The rest: refused for their credential, stored already, or held by a live claim (also
    // when the holder released it between the two statements: the sender asks again later).
    std::vector<std::string_view> rest;
    std::vector<std::string_view> hashes;
    for (const BatchToClaim& b : batches) {
      if (claimed.contains(b.batch_id))
        continue;
      rest.push_back(b.batch_id);
      if (!b.credential_hash.empty())
        hashes.push_back(b.credential_hash);
    }
    // Live credentials by hash, with their compute.
    std::map<std::string, std::string, std::less<>> live;
    if (!hashes.empty()) {
      std::sort(hashes.begin(), hashes.end());
      hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
      EXPANSE_ASSIGN_OR_RETURN(
          Statement rows,
          db.Prepare("SELECT secret_hash, compute_id FROM credentials WHERE revoked_at_ms = 0 "
                     "AND secret_hash IN (" +
                     Placeholders(1, hashes.size()) + ")"));
      EXPANSE_RETURN_IF_ERROR(BindTexts(rows, 1, hashes));
      while (true) {
        EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
        if (!has_row)
          break;
        live.emplace(rows.ColumnText(0), rows.ColumnText(1));
      }
    }
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db.Prepare("SELECT batch_id FROM ingest_batches WHERE stored_at_ms > 0 AND batch_id IN (" +
                   Placeholders(1, rest.size()) + ")"));
    EXPANSE_RETURN_IF_ERROR(BindTexts(rows, 1, rest));
    std::set<std::string, std::less<>> stored;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row)
        break;
      stored.insert(rows.ColumnText(0));
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (claimed.contains(ids[i]))
        continue;
      const std::string_view hash = batches[i].credential_hash;
      if (!hash.empty()) {
        const auto it = live.find(hash);
        if (it == live.end() || it->second != batches[i].compute_id) {
          claims[i] = BatchClaim::kCredentialRefused;
          continue;
        }
      }
      claims[i] = stored.contains(ids[i]) ? BatchClaim::kStored : BatchClaim::kInFlight;
    }
    return claims;
  });
}

Status SqliteStore::MarkIngestBatchesStored(const std::vector<std::string_view>& batch_ids,
                                            int64_t now_ms) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatchIds(batch_ids));
  return LedgerStatement([&](Connection& db) -> Status {
    EXPANSE_ASSIGN_OR_RETURN(Statement statement,
                             db.Prepare(MarkSql(db.engine(), 1, batch_ids.size())));
    // At least 1: 0 means "not stored yet" in the table.
    EXPANSE_RETURN_IF_ERROR(
        BindMarks(statement, db.engine(), 1, now_ms > 0 ? now_ms : int64_t{1}, batch_ids));
    EXPANSE_RETURN_IF_ERROR(statement.Run());
    if (db.Changes() != static_cast<int64_t>(batch_ids.size())) {
      return NotFoundError(
          batch_ids.size() == 1
              ? "ingest batch " + std::string(batch_ids.front()) + " was never claimed"
              : "of " + std::to_string(batch_ids.size()) + " ingest batches, " +
                    std::to_string(batch_ids.size() - db.Changes()) + " were never claimed");
    }
    return OkStatus();
  });
}

Status SqliteStore::ReleaseIngestBatches(const std::vector<std::string_view>& batch_ids,
                                         int64_t claimed_at_ms) {
  EXPANSE_RETURN_IF_ERROR(ValidateBatchIds(batch_ids));
  return LedgerStatement([&](Connection& db) -> Status {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement statement,
        db.Prepare("DELETE FROM ingest_batches WHERE stored_at_ms = 0 AND claimed_at_ms = ?1 "
                   "AND batch_id IN (" +
                   Placeholders(2, batch_ids.size()) + ")"));
    EXPANSE_RETURN_IF_ERROR(statement.Bind(1, claimed_at_ms));
    EXPANSE_RETURN_IF_ERROR(BindTexts(statement, 2, batch_ids));
    return statement.Run();
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
