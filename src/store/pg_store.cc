#include "store/pg_store.h"

#include <utility>

#include "store/migrations.h"
#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store {

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo) {
  EXPANSE_ASSIGN_OR_RETURN(pg_internal::PgConnection pg, pg_internal::PgConnection::Open(conninfo));
  sqlite_internal::Connection db(std::move(pg));
  if (Status migrated = sqlite_internal::ApplyMigrations(db); !migrated.ok())
    return Status(migrated.code(), "PostgreSQL store: " + migrated.message());
  // The ingest batch ledger's own connection, committing asynchronously, its statements all
  // lookups by key (LedgerStatement in sqlite_store_impl.h says why).
  EXPANSE_ASSIGN_OR_RETURN(pg_internal::PgConnection ledger,
                           pg_internal::PgConnection::Open(
                               conninfo, {.asynchronous_commit = true, .index_scans = true}));
  return std::unique_ptr<Store>(std::make_unique<sqlite_internal::SqliteStore>(
      std::move(db), sqlite_internal::Connection(std::move(ledger))));
}

bool IsPostgresUri(const std::string& database) {
  return database.starts_with("postgresql://") || database.starts_with("postgres://");
}

}  // namespace expanse::store
