// Opening the store an operator names with --db: a SQLite file (the default, one server) or a
// PostgreSQL database given as a postgresql:// (or postgres://) URI, which several server
// replicas share (docs/scaling.md).
#ifndef EXPANSE_STORE_OPEN_STORE_H_
#define EXPANSE_STORE_OPEN_STORE_H_

#include <memory>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace expanse::store {

Result<std::unique_ptr<Store>> OpenStore(const std::string& database);

}  // namespace expanse::store

#endif  // EXPANSE_STORE_OPEN_STORE_H_
