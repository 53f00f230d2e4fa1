// Internal to the store module: one SQLite connection that closes itself, with helpers
// that prepare, bind and run statements in one call. Prepared statements are cached by
// their SQL text and reused (a store method's SQL is constant text), so a call pays for
// binding and stepping, not for parsing: preparing was half of authenticating an ingest
// request.
//
// A SqliteConnection is not thread-safe (it is opened with SQLITE_OPEN_NOMUTEX); SqliteStore
// serialises all use of its connection with a mutex.
#ifndef EXPANSE_STORE_SQLITE_CONNECTION_H_
#define EXPANSE_STORE_SQLITE_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/result.h"
#include "core/status.h"
#include "store/sqlite_statement.h"

struct sqlite3;

namespace expanse::store::sqlite_internal {

class SqliteConnection {
 public:
  // Opens (creating when absent) the database at `path`; ":memory:" gives a private
  // in-memory database. Extended result codes are on and SQLite retries a locked
  // database for up to busy_timeout_ms before reporting SQLITE_BUSY.
  static Result<SqliteConnection> Open(const std::string& path, int busy_timeout_ms);

  SqliteConnection(SqliteConnection&& other) noexcept;
  SqliteConnection& operator=(SqliteConnection&& other) noexcept;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;
  ~SqliteConnection();

  // The cached statement for `sql` when it is not in use (one prepared at the first call),
  // else a freshly prepared one: a statement may be prepared again while an earlier one
  // for the same text is still being stepped.
  Result<SqliteStatement> Prepare(std::string_view sql);

  // Prepares `sql` and binds `args` to ?1, ?2, ...; step the result for its rows.
  template <typename... Args>
  Result<SqliteStatement> Query(std::string_view sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql));
    EXPANSE_RETURN_IF_ERROR(statement.BindAll(args...));
    return statement;
  }

  // Prepares, binds and runs a statement that returns no rows.
  template <typename... Args>
  Status Execute(std::string_view sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(SqliteStatement statement, Query(sql, args...));
    return statement.Run();
  }

  // Runs constant SQL that may hold several statements (migrations, BEGIN/COMMIT). Never
  // pass text that contains a value: it is not parameterised.
  Status ExecuteScript(const std::string& sql);

  // The rowid of the last successful INSERT on this connection.
  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  // Prepared statements the connection keeps for reuse.
  size_t cached_statements() const { return cache_.size(); }
  // True inside BEGIN ... COMMIT/ROLLBACK.
  bool InTransaction() const;
  // Ends an open transaction without its changes. For error paths: a failure here leaves
  // nothing better to do, and SQLite may already have rolled back by itself (after
  // SQLITE_FULL, SQLITE_IOERR, ...), so it is not an error.
  void RollbackIfActive();

 private:
  // Distinct texts kept at most; beyond, the least recently used idle one is finalized
  // (texts built with a variable number of parameters, such as IN lists, come and go).
  static constexpr size_t kMaxCachedStatements = 128;

  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  // Finalizes every cached statement; one still borrowed is left to its borrower.
  void FinalizeCache();
  // Makes room for one more cached statement; false when every one is in use.
  bool EvictLeastRecentlyUsed();

  sqlite3* db_;  // null only after a move (or when sqlite3_open_v2 ran out of memory)
  std::unordered_map<std::string, std::shared_ptr<CachedStatement>> cache_;  // by SQL text
  uint64_t uses_ = 0;
};

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQLITE_CONNECTION_H_
