#include "store/sqlite_error.h"

#include <sqlite3.h>

#include <string>

namespace expanse::store::sqlite_internal {

Status SqliteStatus(sqlite3* db, int rc, std::string_view doing) {
  // sqlite3_errmsg() describes the most recent failed call on `db`; without a handle
  // (sqlite3_open_v2 out of memory) only the generic text for the code is known.
  const std::string sqlite_text = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string message = std::string(doing) + ": " + sqlite_text;
  switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return AlreadyExistsError(message);
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return NotFoundError(message + " (a referenced row does not exist)");
    case SQLITE_CONSTRAINT_CHECK:
    case SQLITE_CONSTRAINT_NOTNULL:
      return InvalidArgumentError(message);
    default:
      break;
  }
  switch (rc & 0xFF) {  // the primary result code
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(message +
                              " (another connection held the database past the busy timeout; "
                              "retry later)");
    case SQLITE_FULL:
      return ResourceExhaustedError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLossError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return FailedPreconditionError(message);
    default:
      return InternalError(message);
  }
}

}  // namespace expanse::store::sqlite_internal
