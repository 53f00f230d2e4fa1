// The PostgreSQL implementation of Store (docs/scaling.md): the same store code and schema
// versions as the SQLite one (sqlite_store_impl.h, migrations.h) on a PostgreSQL database that
// any number of expanse-server replicas share.
#ifndef EXPANSE_STORE_PG_STORE_H_
#define EXPANSE_STORE_PG_STORE_H_

#include <memory>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace expanse::store {

// Connects with a libpq connection string or URI (postgresql://user@host:5432/expanse; a
// password belongs in ~/.pgpass or PGPASSFILE, not in the URI) and applies pending
// migrations, one at a time, under the store's writer lock, so replicas starting together
// apply each once. kUnavailable when the server cannot be reached; kFailedPrecondition when
// the database was written by a newer expanse-server (left untouched).
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo);

// Whether `database` names a PostgreSQL database (a postgresql:// or postgres:// URI) rather
// than a SQLite file.
bool IsPostgresUri(const std::string& database);

}  // namespace expanse::store

#endif  // EXPANSE_STORE_PG_STORE_H_
