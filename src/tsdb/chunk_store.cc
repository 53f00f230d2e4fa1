#include "tsdb/chunk_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tsdb/batch_windows.h"
#include "tsdb/chunk_store_schema.h"
#include "tsdb/sqlite_statement.h"

namespace expanse::tsdb {
namespace {

// A batch id "<stream>/<sequence>" whose sequence is a canonical decimal (what the ingest
// endpoint makes of "<compute>/<stream>/<sequence>") is kept as one bit in a window of its
// stream (batch_windows.h) instead of ~50 bytes with the name spelled out. Anything else
// stays text in batch_ids. Canonical, so that joining the parts gives back exactly the id.
struct SplitId {
  std::string stream;
  int64_t seq = 0;
};

std::optional<SplitId> SplitBatchId(std::string_view id) {
  const size_t slash = id.rfind('/');
  if (slash == std::string_view::npos || slash == 0)
    return std::nullopt;
  const std::string_view digits = id.substr(slash + 1);
  // At most 18 digits: kMaxBatchSeq.
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

}  // namespace

namespace {

// Telemetry is the organisations' data: only the server's user may read it, whatever the
// umask. SQLite creates its -wal and -shm files with the database file's mode, so creating
// that file 0600 first covers them too; files of an older build are tightened.
Status CreatePrivateFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UnavailableError("tsdb: cannot create " + path + ": " + std::strerror(errno))
        .WithReason("tsdb_io");
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0)
    (void)::fchmod(fd, 0600);  // not ours (EPERM): left as the owner set it
  ::close(fd);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string companion = path + suffix;
    if (::stat(companion.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
      (void)::chmod(companion.c_str(), 0600);
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(const std::string& path) {
  EXPANSE_RETURN_IF_ERROR(CreatePrivateFile(path));
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<ChunkStore> store(new ChunkStore(db));
  if (rc != SQLITE_OK)
    return SqlError(db, "open " + path);
  // A file from a newer build is refused before anything (even its journal mode) changes.
  EXPANSE_ASSIGN_OR_RETURN(const int64_t layout, CheckChunkStoreLayout(db, path));
  EXPANSE_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  EXPANSE_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  // Off is SQLite's default; the layout upgrade relies on it (chunk_store_schema.cc).
  EXPANSE_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=OFF"));
  if (layout != kChunkStoreLayout)
    EXPANSE_RETURN_IF_ERROR(store->Upgrade(path));
  EXPANSE_RETURN_IF_ERROR(store->LoadLabels());
  return store;
}

Status ChunkStore::Upgrade(const std::string& path) {
  EXPANSE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status status = [&]() -> Status {
    EXPANSE_ASSIGN_OR_RETURN(const bool convert_seqs, PrepareChunkStoreTables(db_, path));
    if (convert_seqs)
      EXPANSE_RETURN_IF_ERROR(ConvertBatchSeqs(db_));
    return RecordChunkStoreLayout(db_, path);
  }();
  if (status.ok())
    status = Exec("COMMIT");
  if (!status.ok())
    (void)Exec("ROLLBACK");
  return status;
}

ChunkStore::ChunkStore(sqlite3* db) : db_(db) {}

ChunkStore::~ChunkStore() {
  read_overlapping_.reset();  // an unfinalized statement keeps sqlite3_close from closing
  sqlite3_close(db_);
}

Status ChunkStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return UnavailableError("tsdb chunk store: " + message).WithReason("tsdb_io");
  }
  return OkStatus();
}

Status ChunkStore::LoadLabels() {
  Statement stmt(db_, "SELECT id, name FROM labels");
  if (!stmt.ok())
    return SqlError(db_, "load labels");
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW)
    label_ids_[stmt.ColumnText(1)] = stmt.ColumnInt(0);
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load labels");
  return OkStatus();
}

Result<std::vector<StoredSeries>> ChunkStore::LoadSeries() {
  // LEFT JOINs so that a series whose label is missing is reported, not silently skipped.
  Statement stmt(db_,
                 "SELECT s.id, c.name, h.name, d.name, m.name, "
                 "(SELECT max(end_ms) FROM chunks WHERE series_id = s.id) FROM series s "
                 "LEFT JOIN labels c ON c.id = s.compute LEFT JOIN labels h ON h.id = s.host "
                 "LEFT JOIN labels d ON d.id = s.device LEFT JOIN labels m ON m.id = s.metric");
  if (!stmt.ok())
    return SqlError(db_, "load series");
  std::vector<StoredSeries> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    StoredSeries& s = out.emplace_back();
    s.id = stmt.ColumnInt(0);
    for (int i = 1; i <= 4; ++i) {
      if (stmt.IsNull(i)) {
        return DataLossError("tsdb chunk store: series " + std::to_string(s.id) +
                             " refers to a label that is not stored")
            .WithReason("tsdb_corrupt");
      }
    }
    s.key = {stmt.ColumnText(1), stmt.ColumnText(2), stmt.ColumnText(3), stmt.ColumnText(4)};
    s.has_chunks = !stmt.IsNull(5);
    s.last_end_ms = stmt.ColumnInt(5);
  }
  if (rc != SQLITE_DONE)
    return SqlError(db_, "load series");
  return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> ChunkStore::LoadBatchIds() {
  Statement streams(db_, "SELECT id, name FROM batch_streams");
  Statement text(db_, "SELECT id, received_ms FROM batch_ids");
  if (!streams.ok() || !text.ok())
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
  EXPANSE_RETURN_IF_ERROR(
      ForEachBatchSequence(db_, [&](int64_t stream_id, int64_t seq, int64_t newest_s) -> Status {
        const auto name = names.find(stream_id);
        if (name == names.end()) {
          return DataLossError("tsdb chunk store: batch stream " + std::to_string(stream_id) +
                               " has sequences but no name")
              .WithReason("tsdb_corrupt");
        }
        // The window's newest receive time, at the last millisecond of its second: retention
        // in memory then forgets no id earlier than it would have before a restart.
        out.emplace_back(name->second + "/" + std::to_string(seq), newest_s * 1000 + 999);
        return OkStatus();
      }));
  return out;
}

Result<int64_t> ChunkStore::StreamId(const std::string& name) {
  if (const auto it = stream_ids_.find(name); it != stream_ids_.end())
    return it->second;
  return NameId("batch_streams", name);
}

Result<int64_t> ChunkStore::NameId(const char* table, const std::string& name) {
  // The no-op update makes RETURNING give the existing row's id too.
  const std::string sql = std::string("INSERT INTO ") + table +
                          " (name) VALUES (?) "
                          "ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id";
  Statement upsert(db_, sql.c_str());
  if (!upsert.ok())
    return SqlError(db_, std::string("prepare ") + table);
  upsert.Text(1, name);
  if (upsert.Step() != SQLITE_ROW)
    return SqlError(db_, std::string("insert into ") + table);
  return upsert.ColumnInt(0);
}

Result<int64_t> ChunkStore::LabelId(const std::string& name,
                                    std::unordered_map<std::string, int64_t>& added) {
  if (const auto it = label_ids_.find(name); it != label_ids_.end())
    return it->second;
  if (const auto it = added.find(name); it != added.end())
    return it->second;
  EXPANSE_ASSIGN_OR_RETURN(const int64_t id, NameId("labels", name));
  added.emplace(name, id);
  return id;
}

Status ChunkStore::WriteBatchIds(const std::vector<std::pair<std::string, int64_t>>& batch_ids,
                                 std::unordered_map<std::string, int64_t>& new_streams) {
  Statement text(db_, "INSERT OR IGNORE INTO batch_ids (id, received_ms) VALUES (?, ?)");
  if (!text.ok())
    return SqlError(db_, "prepare batch ids");
  std::map<std::string, std::vector<ReceivedSeq>> by_stream;
  for (const auto& [id, received_ms] : batch_ids) {
    if (std::optional<SplitId> parts = SplitBatchId(id)) {
      by_stream[parts->stream].push_back({parts->seq, received_ms / 1000});
      continue;
    }
    text.Text(1, id);
    text.Int(2, received_ms);
    EXPANSE_RETURN_IF_ERROR(text.Run("insert batch id"));
  }
  for (auto& [stream, seqs] : by_stream) {
    EXPANSE_ASSIGN_OR_RETURN(const int64_t stream_id, StreamId(stream));
    new_streams.emplace(stream, stream_id);
    EXPANSE_RETURN_IF_ERROR(AddBatchSequences(db_, stream_id, std::move(seqs)));
  }
  return OkStatus();
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
  std::unordered_map<std::string, int64_t> new_labels;
  Status status = [&]() -> Status {
    Statement series(db_,
                     "INSERT INTO series (id, compute, host, device, metric) "
                     "VALUES (?, ?, ?, ?, ?)");
    Statement chunk(db_,
                    "INSERT INTO chunks (series_id, start_ms, end_ms, count, data) "
                    "VALUES (?, ?, ?, ?, ?)");
    Statement head(db_,
                   "INSERT OR REPLACE INTO heads (series_id, start_ms, end_ms, count, data) "
                   "VALUES (?, ?, ?, ?, ?)");
    Statement clear_head(db_, "DELETE FROM heads WHERE series_id = ?");
    if (!series.ok() || !chunk.ok() || !head.ok() || !clear_head.ok())
      return SqlError(db_, "prepare");
    for (const auto& [id, key] : commit.new_series) {
      series.Int(1, id);
      int column = 2;
      for (const std::string* label : {&key.compute_id, &key.host, &key.device, &key.metric}) {
        EXPANSE_ASSIGN_OR_RETURN(const int64_t label_id, LabelId(*label, new_labels));
        series.Int(column++, label_id);
      }
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
    return WriteBatchIds(commit.batch_ids, new_streams);
  }();
  if (status.ok())
    status = Exec("COMMIT");
  if (!status.ok()) {
    (void)Exec("ROLLBACK");
    return status;
  }
  stream_ids_.insert(new_streams.begin(), new_streams.end());
  label_ids_.insert(new_labels.begin(), new_labels.end());
  return OkStatus();
}

Result<std::vector<StoredChunk>> ChunkStore::ReadChunksOverlapping(
    int64_t series_id, std::vector<std::pair<int64_t, int64_t>> windows) {
  if (!read_overlapping_) {
    // The overlap conditions, plus a lower bound on start_ms that lets the index range start
    // at the window instead of at the series' first chunk (a GPU's series holds weeks of
    // them): the chunks of a series never overlap in time, because a sample at or before the
    // last sealed one is dropped (tsdb.h), so no chunk that starts before the last one starting
    // at or before from_ms reaches from_ms.
    read_overlapping_ = std::make_unique<Statement>(
        db_,
        "SELECT rowid, start_ms, end_ms, count, data FROM chunks "
        "WHERE series_id = ?1 AND start_ms < ?2 AND end_ms >= ?3 AND start_ms >= coalesce("
        "(SELECT start_ms FROM chunks WHERE series_id = ?1 AND start_ms <= ?3 "
        "ORDER BY start_ms DESC LIMIT 1), ?3) "
        "ORDER BY start_ms");
    if (!read_overlapping_->ok()) {
      read_overlapping_.reset();
      return SqlError(db_, "read chunks");
    }
  }
  Statement& stmt = *read_overlapping_;
  // Overlapping or touching windows become one: a chunk meets their union exactly when it
  // meets one of them.
  std::sort(windows.begin(), windows.end());
  std::vector<std::pair<int64_t, StoredChunk>> found;  // by rowid
  for (size_t i = 0; i < windows.size();) {
    auto [from_ms, to_ms] = windows[i];
    for (++i; i < windows.size() && windows[i].first <= to_ms; ++i)
      to_ms = std::max(to_ms, windows[i].second);
    stmt.Int(1, series_id);
    stmt.Int(2, to_ms);
    stmt.Int(3, from_ms);
    int rc;
    while ((rc = stmt.Step()) == SQLITE_ROW) {
      found.emplace_back(stmt.ColumnInt(0),
                         StoredChunk{series_id, stmt.ColumnInt(1), stmt.ColumnInt(2),
                                     static_cast<uint32_t>(stmt.ColumnInt(3)), stmt.ColumnBlob(4)});
    }
    stmt.Reset();
    if (rc != SQLITE_DONE)
      return SqlError(db_, "read chunks");
  }
  // A chunk that spans the gap between two windows came once for each. Ties in start_ms are in
  // rowid order, as ReadChunks' index scan gives them.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second.start_ms, a.first) < std::tie(b.second.start_ms, b.first);
  });
  std::vector<StoredChunk> out;
  for (size_t i = 0; i < found.size(); ++i) {
    if (i == 0 || found[i].first != found[i - 1].first)
      out.push_back(std::move(found[i].second));
  }
  return out;
}

Result<int64_t> ChunkStore::DeleteBefore(int64_t cutoff_ms, int64_t batch_cutoff_ms) {
  Statement chunks(db_, "DELETE FROM chunks WHERE end_ms < ?");
  Statement heads(db_, "DELETE FROM heads WHERE end_ms < ?");
  Statement batches(db_, "DELETE FROM batch_ids WHERE received_ms < ?");
  if (!chunks.ok() || !heads.ok() || !batches.ok())
    return SqlError(db_, "prepare retention");
  chunks.Int(1, cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(chunks.Run("delete chunks"));
  const int64_t dropped = sqlite3_changes64(db_);
  heads.Int(1, cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(heads.Run("delete heads"));
  batches.Int(1, batch_cutoff_ms);
  EXPANSE_RETURN_IF_ERROR(batches.Run("delete batch ids"));
  // Whole seconds: a window whose newest member came in the cutoff's second stays, never one
  // before it.
  EXPANSE_RETURN_IF_ERROR(
      DeleteBatchWindowsBefore(db_, batch_cutoff_ms / 1000 - (batch_cutoff_ms % 1000 < 0 ? 1 : 0)));
  return dropped;
}

Status ChunkStore::DeleteEmptySeries(const std::vector<int64_t>& series_ids) {
  if (series_ids.empty())
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status status = [&]() -> Status {
    Statement drop(db_,
                   "DELETE FROM series WHERE id = ?1 "
                   "AND NOT EXISTS (SELECT 1 FROM chunks WHERE series_id = ?1) "
                   "AND NOT EXISTS (SELECT 1 FROM heads WHERE series_id = ?1)");
    if (!drop.ok())
      return SqlError(db_, "prepare series delete");
    for (const int64_t id : series_ids) {
      drop.Int(1, id);
      EXPANSE_RETURN_IF_ERROR(drop.Run("delete series"));
    }
    return OkStatus();
  }();
  if (status.ok())
    status = Exec("COMMIT");
  if (!status.ok())
    (void)Exec("ROLLBACK");
  return status;
}

Result<ChunkStore::Totals> ChunkStore::GetTotals() {
  Statement stmt(db_, "SELECT count(*), coalesce(sum(count), 0) FROM chunks");
  if (!stmt.ok() || stmt.Step() != SQLITE_ROW)
    return SqlError(db_, "totals");
  return Totals{static_cast<uint64_t>(stmt.ColumnInt(0)), static_cast<uint64_t>(stmt.ColumnInt(1))};
}

}  // namespace expanse::tsdb
