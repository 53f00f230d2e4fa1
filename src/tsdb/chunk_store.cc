#include "tsdb/chunk_store.h"

#include <sqlite3.h>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace expanse::tsdb {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS series (
  id INTEGER PRIMARY KEY,
  compute_id TEXT NOT NULL, host TEXT NOT NULL, device TEXT NOT NULL, metric TEXT NOT NULL,
  UNIQUE (compute_id, host, device, metric)) STRICT;
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
CREATE TABLE IF NOT EXISTS batch_seqs (
  stream_id INTEGER NOT NULL REFERENCES batch_streams(id), seq INTEGER NOT NULL,
  received_s INTEGER NOT NULL, PRIMARY KEY (stream_id, seq)) STRICT, WITHOUT ROWID;
)sql";

// A batch id "<stream>/<sequence>" whose sequence is a canonical decimal (what the ingest
// endpoint makes of "<compute>/<stream>/<sequence>") is kept as two integers in batch_seqs:
// ~16 bytes a batch instead of ~50 with the name spelled out. Anything else stays text in
// batch_ids. Canonical, so that joining the parts gives back exactly the id.
struct SplitId {
  std::string stream;
  int64_t seq = 0;
};

std::optional<SplitId> SplitBatchId(std::string_view id) {
  const size_t slash = id.rfind('/');
  if (slash == std::string_view::npos || slash == 0)
    return std::nullopt;
  const std::string_view digits = id.substr(slash + 1);
  if (digits.empty() || digits.size() > 18 || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  int64_t seq = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    seq = seq * 10 + (c - '0');
  }
  return SplitId{std::string(id.substr(0, slash)), seq};
}

Status SqlError(sqlite3* db, const std::string& what) {
  return UnavailableError("tsdb chunk store: " + what + ": " + sqlite3_errmsg(db))
      .WithReason("tsdb_io");
}

// Owns one prepared statement; finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }
  void Int(int index, int64_t v) { sqlite3_bind_int64(stmt_, index, v); }
  void Text(int index, const std::string& v) {
    sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  void Blob(int index, const std::string& v) {
    sqlite3_bind_blob(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  Status Run(const char* what) {
    const int rc = Step();
    sqlite3_reset(stmt_);
    return rc == SQLITE_DONE ? OkStatus() : SqlError(db_, what);
  }
  std::string ColumnText(int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, i))) : "";
  }
  std::string ColumnBlob(int i) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, i))) : "";
  }
  int64_t ColumnInt(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<ChunkStore> store(new ChunkStore(db));
  if (rc != SQLITE_OK)
    return SqlError(db, "open " + path);
  EXPANSE_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  EXPANSE_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  EXPANSE_RETURN_IF_ERROR(store->Exec(kSchema));
  return store;
}

ChunkStore::~ChunkStore() { sqlite3_close(db_); }

Status ChunkStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return UnavailableError("tsdb chunk store: " + message).WithReason("tsdb_io");
  }
  return OkStatus();
}

Result<std::vector<StoredSeries>> ChunkStore::LoadSeries() {
  Statement stmt(db_,
                 "SELECT s.id, s.compute_id, s.host, s.device, s.metric, "
                 "(SELECT max(end_ms) FROM chunks WHERE series_id = s.id) FROM series s");
  if (!stmt.ok())
    return SqlError(db_, "load series");
  std::vector<StoredSeries> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    StoredSeries& s = out.emplace_back();
    s.id = stmt.ColumnInt(0);
    s.key = {stmt.ColumnText(1), stmt.ColumnText(2), stmt.ColumnText(3), stmt.ColumnText(4)};
    s.has_chunks = sqlite3_column_type(stmt.get(), 5) != SQLITE_NULL;
    s.last_end_ms = stmt.ColumnInt(5);
  }
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load series");
  return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> ChunkStore::LoadBatchIds() {
  Statement streams(db_, "SELECT id, name FROM batch_streams");
  Statement text(db_, "SELECT id, received_ms FROM batch_ids");
  Statement split(db_, "SELECT stream_id, seq, received_s FROM batch_seqs");
  if (!streams.ok() || !text.ok() || !split.ok())
    return SqlError(db_, "load batch ids");
  std::unordered_map<int64_t, std::string> names;
  int rc;
  while ((rc = streams.Step()) == SQLITE_ROW)
    names[streams.ColumnInt(0)] = streams.ColumnText(1);
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load batch streams");
  stream_ids_.clear();
  for (const auto& [id, name] : names)
    stream_ids_[name] = id;
  std::vector<std::pair<std::string, int64_t>> out;
  while ((rc = text.Step()) == SQLITE_ROW)
    out.emplace_back(text.ColumnText(0), text.ColumnInt(1));
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load batch ids");
  while ((rc = split.Step()) == SQLITE_ROW) {
    const auto name = names.find(split.ColumnInt(0));
    if (name == names.end())
      continue;  // REFERENCES batch_streams(id) keeps this from happening
    out.emplace_back(name->second + "/" + std::to_string(split.ColumnInt(1)),
                     // The last millisecond of the stored second: retention in memory then
                     // forgets the id no earlier than it would have before a restart.
                     split.ColumnInt(2) * 1000 + 999);
  }
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load batch ids");
  return out;
}

Result<int64_t> ChunkStore::StreamId(const std::string& name) {
  if (const auto it = stream_ids_.find(name); it != stream_ids_.end())
    return it->second;
  Statement insert(db_, "INSERT OR IGNORE INTO batch_streams (name) VALUES (?)");
  Statement select(db_, "SELECT id FROM batch_streams WHERE name = ?");
  if (!insert.ok() || !select.ok())
    return SqlError(db_, "prepare batch stream");
  insert.Text(1, name);
  EXPANSE_RETURN_IF_ERROR(insert.Run("insert batch stream"));
  select.Text(1, name);
  if (select.Step() != SQLITE_ROW)
    return SqlError(db_, "read batch stream id");
  return select.ColumnInt(0);
}

Result<std::vector<StoredChunk>> ChunkStore::LoadHeads() {
  Statement stmt(db_, "SELECT series_id, start_ms, end_ms, count, data FROM heads");
  if (!stmt.ok())
    return SqlError(db_, "load heads");
  std::vector<StoredChunk> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    out.push_back({stmt.ColumnInt(0), stmt.ColumnInt(1), stmt.ColumnInt(2),
                   static_cast<uint32_t>(stmt.ColumnInt(3)), stmt.ColumnBlob(4)});
  }
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load heads");
  return out;
}

Status ChunkStore::Write(const ChunkCommit& commit) {
  EXPANSE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  std::unordered_map<std::string, int64_t> new_streams;
  Status status = [&]() -> Status {
    Statement series(db_,
                     "INSERT INTO series (id, compute_id, host, device, metric) "
                     "VALUES (?, ?, ?, ?, ?)");
    Statement chunk(db_,
                    "INSERT INTO chunks (series_id, start_ms, end_ms, count, data) "
                    "VALUES (?, ?, ?, ?, ?)");
    Statement head(db_,
                   "INSERT OR REPLACE INTO heads (series_id, start_ms, end_ms, count, data) "
                   "VALUES (?, ?, ?, ?, ?)");
    Statement clear_head(db_, "DELETE FROM heads WHERE series_id = ?");
    Statement batch(db_, "INSERT OR IGNORE INTO batch_ids (id, received_ms) VALUES (?, ?)");
    Statement seq(db_,
                  "INSERT OR IGNORE INTO batch_seqs (stream_id, seq, received_s) VALUES (?, ?, ?)");
    if (!series.ok() || !chunk.ok() || !head.ok() || !clear_head.ok() || !batch.ok() || !seq.ok())
      return SqlError(db_, "prepare");
    for (const auto& [id, key] : commit.new_series) {
      series.Int(1, id);
      series.Text(2, key.compute_id);
      series.Text(3, key.host);
      series.Text(4, key.device);
      series.Text(5, key.metric);
      EXPANSE_RETURN_IF_ERROR(series.Run("insert series"));
    }
    // Sealed chunks and saved heads have the same columns.
    auto bind_chunk = [](Statement& statement, const StoredChunk& c) {
      statement.Int(1, c.series_id);
      statement.Int(2, c.start_ms);
      statement.Int(3, c.end_ms);
      statement.Int(4, c.count);
      statement.Blob(5, c.data);
    };
    for (const StoredChunk& c : commit.chunks) {
      bind_chunk(chunk, c);
      EXPANSE_RETURN_IF_ERROR(chunk.Run("insert chunk"));
    }
    if (commit.replace_all_heads) {
      // Without a WHERE clause SQLite frees the table's pages at once; the inserts below
      // then append in series order to a fresh b-tree.
      EXPANSE_RETURN_IF_ERROR(Exec("DELETE FROM heads"));
    }
    for (const int64_t series_id : commit.cleared_heads) {
      clear_head.Int(1, series_id);
      EXPANSE_RETURN_IF_ERROR(clear_head.Run("delete head"));
    }
    for (const StoredChunk& c : commit.heads) {
      bind_chunk(head, c);
      EXPANSE_RETURN_IF_ERROR(head.Run("write head"));
    }
    for (const auto& [id, received_ms] : commit.batch_ids) {
      if (std::optional<SplitId> parts = SplitBatchId(id)) {
        EXPANSE_ASSIGN_OR_RETURN(const int64_t stream_id, StreamId(parts->stream));
        new_streams.emplace(parts->stream, stream_id);
        seq.Int(1, stream_id);
        seq.Int(2, parts->seq);
        seq.Int(3, received_ms / 1000);
        EXPANSE_RETURN_IF_ERROR(seq.Run("insert batch sequence"));
        continue;
      }
      batch.Text(1, id);
      batch.Int(2, received_ms);
      EXPANSE_RETURN_IF_ERROR(batch.Run("insert batch id"));
    }
    return OkStatus();
  }();
  if (status.ok())
    status = Exec("COMMIT");
  if (!status.ok()) {
    (void)Exec("ROLLBACK");
    return status;
  }
  stream_ids_.insert(new_streams.begin(), new_streams.end());
  return OkStatus();
}

Result<std::vector<std::string>> ChunkStore::ReadChunks(int64_t series_id, int64_t from_ms,
                                                        int64_t to_ms) {
  Statement stmt(db_,
                 "SELECT data FROM chunks WHERE series_id = ? AND start_ms < ? AND end_ms >= ? "
                 "ORDER BY start_ms");
  if (!stmt.ok())
    return SqlError(db_, "read chunks");
  stmt.Int(1, series_id);
  stmt.Int(2, to_ms);
  stmt.Int(3, from_ms);
  std::vector<std::string> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW)
    out.push_back(stmt.ColumnBlob(0));
  if (rc != SQLITE_DONE)
    return SqlError(db_, "read chunks");
  return out;
}

Result<int64_t> ChunkStore::DeleteBefore(int64_t cutoff_ms, int64_t batch_cutoff_ms) {
  Statement chunks(db_, "DELETE FROM chunks WHERE end_ms < ?");
  Statement heads(db_, "DELETE FROM heads WHERE end_ms < ?");
  Statement batches(db_, "DELETE FROM batch_ids WHERE received_ms < ?");
  Statement seqs(db_, "DELETE FROM batch_seqs WHERE received_s < ?");
  if (!chunks.ok() || !heads.ok() || !batches.ok() || !seqs.ok())
    return SqlError(db_, "prepare retention");
  chunks.Int(1, cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(chunks.Run("delete chunks"));
  const int64_t dropped = sqlite3_changes64(db_);
  heads.Int(1, cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(heads.Run("delete heads"));
  batches.Int(1, batch_cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(batches.Run("delete batch ids"));
  // Whole seconds: a received time in the cutoff's second stays, never one before it.
  seqs.Int(1, batch_cutoff_ms / 1000 - (batch_cutoff_ms % 1000 < 0 ? 1 : 0));
  EXPANSE_RETURN_IF_ERROR(seqs.Run("delete batch sequences"));
  return dropped;
}

Result<ChunkStore::Totals> ChunkStore::GetTotals() {
  Statement stmt(db_, "SELECT count(*), coalesce(sum(count), 0) FROM chunks");
  if (!stmt.ok() || stmt.Step() != SQLITE_ROW)
    return SqlError(db_, "totals");
  return Totals{static_cast<uint64_t>(stmt.ColumnInt(0)), static_cast<uint64_t>(stmt.ColumnInt(1))};
}

}  // namespace expanse::tsdb
