#include "store/sqlite_connection.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "store/sqlite_error.h"

namespace expanse::store::sqlite_internal {

namespace {

// The database holds password and token hashes and sessions: only its owner may read it,
// whatever the umask (docs/formats/store-sqlite.md). SQLite creates the file with 0644 less
// the umask, and its -wal, -shm and -journal files with the database file's own mode, so the
// file is created here first, 0600; an existing one that others could read (from an older
// build) is tightened, as are its companions, when this user owns them.
Status CreatePrivateDatabaseFile(const std::string& path) {
  if (path.empty() || path == ":memory:") {
    return OkStatus();
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return OkStatus();  // SQLite's own open fails the same way and says so in its terms
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
    (void)::fchmod(fd, 0600);  // not ours (EPERM): left as the owner set it
  }
  ::close(fd);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string companion = path + suffix;
    if (::stat(companion.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      (void)::chmod(companion.c_str(), 0600);
    }
  }
  return OkStatus();
}

}  // namespace

Result<SqliteConnection> SqliteConnection::Open(const std::string& path, int busy_timeout_ms) {
  EXPANSE_RETURN_IF_ERROR(CreatePrivateDatabaseFile(path));
  sqlite3* db = nullptr;
  // No SQLITE_OPEN_URI: the path is a file name, never "file:...?mode=..." options.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  // sqlite3_open_v2 hands out a handle even when it fails; the SqliteConnection closes it.
  SqliteConnection connection(db);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db, rc, "opening the database");
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return connection;
}

SqliteConnection::SqliteConnection(SqliteConnection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), cache_(std::move(other.cache_)), uses_(other.uses_) {}

SqliteConnection& SqliteConnection::operator=(SqliteConnection&& other) noexcept {
  if (this != &other) {
    FinalizeCache();
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    cache_ = std::move(other.cache_);
    uses_ = other.uses_;
  }
  return *this;
}

// sqlite3_close_v2 copes with statements still open: it closes once they are finalized.
SqliteConnection::~SqliteConnection() {
  FinalizeCache();
  sqlite3_close_v2(db_);
}

void SqliteConnection::FinalizeCache() {
  for (auto& [sql, cached] : cache_) {
    if (cached->in_use) {
      cached->orphaned = true;
    } else {
      sqlite3_finalize(cached->statement);
    }
  }
  cache_.clear();
}

bool SqliteConnection::EvictLeastRecentlyUsed() {
  auto oldest = cache_.end();
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (!it->second->in_use &&
        (oldest == cache_.end() || it->second->last_used < oldest->second->last_used)) {
      oldest = it;
    }
  }
  if (oldest == cache_.end())
    return false;
  sqlite3_finalize(oldest->second->statement);
  cache_.erase(oldest);
  return true;
}

Result<SqliteStatement> SqliteConnection::Prepare(std::string_view sql) {
  std::string key(sql);
  const auto found = cache_.find(key);
  if (found != cache_.end() && !found->second->in_use) {
    found->second->in_use = true;
    found->second->last_used = ++uses_;
    return SqliteStatement(found->second);
  }
  // A text already cached but in use (a nested query) gets a statement of its own.
  const bool cache_it =
      found == cache_.end() && (cache_.size() < kMaxCachedStatements || EvictLeastRecentlyUsed());
  sqlite3_stmt* statement = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    cache_it ? SQLITE_PREPARE_PERSISTENT : 0, &statement, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(statement);
    return SqliteStatus(db_, rc, "preparing SQL statement \"" + key + "\"");
  }
  if (statement == nullptr) {  // the text was only blanks or comments
    return InternalError("SQL text holds no statement: \"" + key + "\"");
  }
  if (!cache_it)
    return SqliteStatement(statement);
  auto cached = std::make_shared<CachedStatement>(
      CachedStatement{.statement = statement, .in_use = true, .last_used = ++uses_});
  cache_.emplace(std::move(key), cached);
  return SqliteStatement(std::move(cached));
}

Status SqliteConnection::ExecuteScript(const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);  // sqlite3_errmsg() below carries the same text
  if (rc != SQLITE_OK) {
    const std::string_view first_line = std::string_view(sql).substr(0, sql.find('\n'));
    return SqliteStatus(db_, rc, "running SQL \"" + std::string(first_line) + "\"");
  }
  return OkStatus();
}

int64_t SqliteConnection::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int64_t SqliteConnection::Changes() const { return sqlite3_changes64(db_); }

bool SqliteConnection::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

void SqliteConnection::RollbackIfActive() {
  if (InTransaction()) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

}  // namespace expanse::store::sqlite_internal
