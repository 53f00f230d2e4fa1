// Internal to the store module: turning SQLite result codes into Status values.
#ifndef EXPANSE_STORE_SQLITE_ERROR_H_
#define EXPANSE_STORE_SQLITE_ERROR_H_

#include <string_view>

#include "core/status.h"

struct sqlite3;

namespace expanse::store::sqlite_internal {

// The Status for the failed SQLite call that returned `rc` (an extended result code) on
// `db` (may be null). `doing` says what was being done ("preparing statement ...").
// The code is chosen by what the caller can do next:
//   SQLITE_BUSY, SQLITE_LOCKED (after the busy timeout)  -> kUnavailable: retry later
//   UNIQUE / PRIMARY KEY constraint                      -> kAlreadyExists
//   FOREIGN KEY constraint                               -> kNotFound (a referenced row)
//   CHECK / NOT NULL constraint                          -> kInvalidArgument
//   SQLITE_FULL                                          -> kResourceExhausted
//   SQLITE_CORRUPT, SQLITE_NOTADB                        -> kDataLoss
//   SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM        -> kFailedPrecondition
//   anything else                                        -> kInternal
// The message carries sqlite3_errmsg(), which names tables and columns but never bound
// values, so secret hashes cannot leak through it.
Status SqliteStatus(sqlite3* db, int rc, std::string_view doing);

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQLITE_ERROR_H_
