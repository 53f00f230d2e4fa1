#include "tsdb/chunk_store_schema.h"

#include <sqlite3.h>

#include <string>

#include "core/result.h"

namespace expanse::tsdb {
namespace {

// Layouts 1 and 2. Series keys are four references into `labels`, which holds each compute id,
// host, device and metric name once: a series row is a few bytes instead of its names
// spelled out twice (row and unique index). Batch sequences are bitmaps over windows.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS labels (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;
CREATE TABLE IF NOT EXISTS series (
  id INTEGER PRIMARY KEY,
  compute INTEGER NOT NULL REFERENCES labels(id), host INTEGER NOT NULL REFERENCES labels(id),
  device INTEGER NOT NULL REFERENCES labels(id), metric INTEGER NOT NULL REFERENCES labels(id)
  ) STRICT;
CREATE TABLE IF NOT EXISTS chunks (
  series_id INTEGER NOT NULL REFERENCES series(id),
  start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL) STRICT;
CREATE INDEX IF NOT EXISTS chunks_by_series ON chunks (series_id, start_ms);
CREATE INDEX IF NOT EXISTS chunks_by_end ON chunks (end_ms);
CREATE TABLE IF NOT EXISTS heads (
  series_id INTEGER PRIMARY KEY REFERENCES series(id),
  start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS batch_ids (
  id TEXT PRIMARY KEY, received_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batch_streams (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;
CREATE TABLE IF NOT EXISTS batch_windows (
  stream_id INTEGER NOT NULL REFERENCES batch_streams(id), first_seq INTEGER NOT NULL,
  members BLOB NOT NULL, first_s INTEGER NOT NULL, last_s INTEGER NOT NULL,
  PRIMARY KEY (stream_id, first_seq)) STRICT, WITHOUT ROWID;
)sql";

// Layout 0 kept the names in `series` itself. The new table is filled beside it and then
// takes its name, so the `REFERENCES series(id)` of chunks and heads need no rewrite
// (foreign keys are not enforced on this connection, so the moment between DROP and
// RENAME is legal).
constexpr const char* kSeriesNamesToLabels = R"sql(
CREATE TABLE labels (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT;
INSERT INTO labels (name)
  SELECT compute_id FROM series UNION SELECT host FROM series
  UNION SELECT device FROM series UNION SELECT metric FROM series;
CREATE TABLE series_by_label (
  id INTEGER PRIMARY KEY,
  compute INTEGER NOT NULL REFERENCES labels(id), host INTEGER NOT NULL REFERENCES labels(id),
  device INTEGER NOT NULL REFERENCES labels(id), metric INTEGER NOT NULL REFERENCES labels(id)
  ) STRICT;
INSERT INTO series_by_label (id, compute, host, device, metric)
  SELECT s.id, c.id, h.id, d.id, m.id FROM series s
  JOIN labels c ON c.name = s.compute_id JOIN labels h ON h.name = s.host
  JOIN labels d ON d.name = s.device JOIN labels m ON m.name = s.metric;
DROP TABLE series;
ALTER TABLE series_by_label RENAME TO series;
)sql";

Status SchemaError(sqlite3* db, const std::string& path, const std::string& what) {
  return UnavailableError("tsdb chunk store " + path + ": " + what + ": " + sqlite3_errmsg(db))
      .WithReason("tsdb_io");
}

Status Exec(sqlite3* db, const std::string& path, const char* sql, const std::string& what) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
    return SchemaError(db, path, what);
  return OkStatus();
}

// One integer from a single-row query, or -1 when it returns no row.
Result<int64_t> QueryInt(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK)
    return SchemaError(db, path, "read layout");
  const int rc = sqlite3_step(stmt);
  const int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return SchemaError(db, path, "read layout");
  return value;
}

}  // namespace

Result<int64_t> CheckChunkStoreLayout(sqlite3* db, const std::string& path) {
  EXPANSE_ASSIGN_OR_RETURN(const int64_t layout, QueryInt(db, path, "PRAGMA user_version"));
  if (layout > kChunkStoreLayout) {
    return FailedPreconditionError("tsdb chunk store " + path + " has layout " +
                                   std::to_string(layout) +
                                   ", written by a newer expanse-server; this build reads "
                                   "layouts up to " +
                                   std::to_string(kChunkStoreLayout))
        .WithReason("tsdb_layout");
  }
  return layout;
}

Result<bool> PrepareChunkStoreTables(sqlite3* db, const std::string& path) {
  // Again, inside the transaction: another process may have upgraded the file meanwhile.
  EXPANSE_ASSIGN_OR_RETURN(const int64_t layout, CheckChunkStoreLayout(db, path));
  if (layout == kChunkStoreLayout)
    return false;
  EXPANSE_ASSIGN_OR_RETURN(
      const int64_t named_series,
      QueryInt(db, path, "SELECT 1 FROM pragma_table_info('series') WHERE name = 'compute_id'"));
  if (named_series == 1)
    EXPANSE_RETURN_IF_ERROR(Exec(db, path, kSeriesNamesToLabels, "upgrade series to labels"));
  EXPANSE_RETURN_IF_ERROR(Exec(db, path, kSchema, "create tables"));
  EXPANSE_ASSIGN_OR_RETURN(
      const int64_t sequences,
      QueryInt(db, path,
               "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'batch_seqs'"));
  return sequences == 1;
}

Status RecordChunkStoreLayout(sqlite3* db, const std::string& path) {
  const std::string set_layout = "PRAGMA user_version = " + std::to_string(kChunkStoreLayout);
  return Exec(db, path, set_layout.c_str(), "record layout");
}

}  // namespace expanse::tsdb
