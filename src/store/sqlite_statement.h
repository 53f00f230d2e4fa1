// Internal to the store module: a prepared SQLite statement that finalizes itself, or, when
// borrowed from its connection's cache, resets itself for the next user.
//
// Values only ever reach SQL as bound parameters (?1, ?2, ...); SQL text is built from
// constants alone. That is the whole defence against SQL injection, so keep it that way.
#ifndef EXPANSE_STORE_SQLITE_STATEMENT_H_
#define EXPANSE_STORE_SQLITE_STATEMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"
#include "core/status.h"

struct sqlite3_stmt;

namespace expanse::store::sqlite_internal {

// A prepared statement a SqliteConnection keeps for reuse (sqlite_connection.h), shared with the
// SqliteStatement that borrows it.
struct CachedStatement {
  sqlite3_stmt* statement = nullptr;
  bool in_use = false;
  // The connection let go of it while it was borrowed: the borrower finalizes it.
  bool orphaned = false;
  uint64_t last_used = 0;  // the connection's use count at the last borrow
};

class SqliteStatement {
 public:
  // Takes ownership of a statement from sqlite3_prepare_v2; must not be null.
  explicit SqliteStatement(sqlite3_stmt* statement) : statement_(statement) {}
  // Borrows a cached statement (marked in use by the caller): the destructor resets it,
  // clears its bindings and hands it back instead of finalizing it.
  explicit SqliteStatement(std::shared_ptr<CachedStatement> cached)
      : statement_(cached->statement), cached_(std::move(cached)) {}
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Binds the arguments to ?1, ?2, ... in order; stops at the first failure.
  template <typename... Args>
  Status BindAll(const Args&... args) {
    int index = 0;
    Status status;
    ((status = status.ok() ? Bind(++index, args) : status), ...);
    return status;
  }
  Status Bind(int index, int64_t value);
  // Bound as TEXT with its exact length: any bytes, quotes and SQL metacharacters included,
  // come back unchanged.
  Status Bind(int index, std::string_view value);

  // true: a row is ready for the Column accessors; false: the statement is done.
  Result<bool> Step();
  // Steps a statement that returns no rows (INSERT, UPDATE, ...) to completion.
  Status Run();
  // Makes the statement ready to be bound and run again, so a batch prepares it once.
  void Reset();

  int64_t ColumnInt(int column) const;
  // The column's bytes; "" for NULL.
  std::string ColumnText(int column) const;

 private:
  // Finalizes an owned statement or hands a borrowed one back to its cache.
  void Release();
  std::string SqlForMessage() const;
  Status Error(int rc, std::string_view doing) const;

  sqlite3_stmt* statement_;                  // null only after a move
  std::shared_ptr<CachedStatement> cached_;  // set when borrowed
};

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQLITE_STATEMENT_H_
