// The SQLite implementation of Store: one database file, WAL mode, versioned migrations.
// docs/formats/store-sqlite.md describes the schema.
#ifndef EXPANSE_STORE_SQLITE_STORE_H_
#define EXPANSE_STORE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace expanse::store {

struct SqliteStoreOptions {
  // The database file, created when absent; ":memory:" gives a private in-memory database
  // (for tests: it vanishes with the store and is not shared between stores).
  std::string path;
  // How long a writer waits for another process's write transaction before the call
  // fails with kUnavailable.
  int busy_timeout_ms = 5000;
};

// Opens the database, turns on WAL journaling (synchronous=NORMAL) and foreign keys, and
// applies pending migrations. The returned Store is safe to call from several threads:
// calls are serialised on one connection, each in its own transaction.
// Fails with kFailedPrecondition when the database was written by a newer expanse-server
// (its schema version is above the newest this binary knows) or WAL cannot be enabled,
// and kInvalidArgument for an empty path or a negative timeout.
Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options);

}  // namespace expanse::store

#endif  // EXPANSE_STORE_SQLITE_STORE_H_
