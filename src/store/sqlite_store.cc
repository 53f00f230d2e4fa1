#include "store/sqlite_store.h"

#include <string>
#include <utility>

#include "store/message_text.h"
#include "store/migrations.h"
#include "store/sql_connection.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store {
namespace {

using sqlite_internal::SqliteConnection;
using sqlite_internal::SqliteStatement;

// Runs a PRAGMA that reports its new value (journal_mode does) and returns that value.
Result<std::string> QueryPragma(SqliteConnection& db, std::string_view pragma) {
  EXPANSE_ASSIGN_OR_RETURN(SqliteStatement statement, db.Prepare(pragma));
  EXPANSE_ASSIGN_OR_RETURN(const bool has_row, statement.Step());
  return has_row ? statement.ColumnText(0) : std::string();
}

Status Configure(SqliteConnection& db, const SqliteStoreOptions& options) {
  // WAL lets readers run while one writer commits; an in-memory database has no journal
  // file and reports "memory" instead.
  EXPANSE_ASSIGN_OR_RETURN(const std::string journal_mode,
                           QueryPragma(db, "PRAGMA journal_mode = WAL"));
  if (journal_mode != "wal" && !(options.path == ":memory:" && journal_mode == "memory")) {
    return FailedPreconditionError(
        "cannot enable WAL journal mode (SQLite kept " +
        store_internal::QuoteForMessage(journal_mode) +
        "); put the database on a local file system that supports shared memory");
  }
  // NORMAL is durable across application crashes in WAL mode; a power loss may drop the
  // last commits but never corrupts the file (https://sqlite.org/pragma.html#pragma_synchronous).
  EXPANSE_RETURN_IF_ERROR(db.ExecuteScript("PRAGMA synchronous = NORMAL"));
  // Per connection and off by default; the schema relies on it.
  EXPANSE_RETURN_IF_ERROR(db.ExecuteScript("PRAGMA foreign_keys = ON"));
  EXPANSE_ASSIGN_OR_RETURN(const std::string foreign_keys, QueryPragma(db, "PRAGMA foreign_keys"));
  if (foreign_keys != "1") {
    return FailedPreconditionError("this SQLite library cannot enforce foreign keys");
  }
  return OkStatus();
}

Result<std::unique_ptr<Store>> Open(const SqliteStoreOptions& options) {
  EXPANSE_ASSIGN_OR_RETURN(SqliteConnection sqlite,
                           SqliteConnection::Open(options.path, options.busy_timeout_ms));
  EXPANSE_RETURN_IF_ERROR(Configure(sqlite, options));
  sqlite_internal::Connection db(std::move(sqlite));
  EXPANSE_RETURN_IF_ERROR(sqlite_internal::ApplyMigrations(db));
  return std::unique_ptr<Store>(std::make_unique<sqlite_internal::SqliteStore>(std::move(db)));
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options) {
  if (options.path.empty()) {
    // SQLite would quietly open a temporary database that vanishes on close.
    return InvalidArgumentError("SQLite store path is empty; give a file name or \":memory:\"");
  }
  if (options.path.find('\0') != std::string::npos) {
    return InvalidArgumentError("SQLite store path " +
                                store_internal::QuoteForMessage(options.path) +
                                " contains a NUL byte");
  }
  if (options.busy_timeout_ms < 0) {
    return InvalidArgumentError("SQLite busy timeout is " +
                                std::to_string(options.busy_timeout_ms) +
                                " ms; it must not be negative");
  }
  Result<std::unique_ptr<Store>> store = Open(options);
  if (!store.ok()) {
    // Every failure here is about this one file; say which.
    return Status(store.status().code(), "SQLite store " +
                                             store_internal::QuoteForMessage(options.path) + ": " +
                                             store.status().message());
  }
  return store;
}

}  // namespace expanse::store
