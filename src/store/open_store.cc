#include "store/open_store.h"

#include "store/pg_store.h"
#include "store/sqlite_store.h"

namespace expanse::store {

Result<std::unique_ptr<Store>> OpenStore(const std::string& database) {
  if (IsPostgresUri(database))
    return OpenPostgresStore(database);
  return OpenSqliteStore({.path = database});
}

}  // namespace expanse::store
