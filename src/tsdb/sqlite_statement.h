// Internal to the tsdb module: one prepared statement on the chunk store's own connection.
// (The server's store has a statement cache; the chunk store runs a handful of statements
// per Flush and needs none.)
#ifndef EXPANSE_TSDB_SQLITE_STATEMENT_H_
#define EXPANSE_TSDB_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace expanse::tsdb {

inline Status SqlError(sqlite3* db, const std::string& what) {
  return UnavailableError("tsdb chunk store: " + what + ": " + sqlite3_errmsg(db))
      .WithReason("tsdb_io");
}

// Owns one prepared statement; finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }
  void Int(int index, int64_t v) { sqlite3_bind_int64(stmt_, index, v); }
  void Text(int index, const std::string& v) {
    sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  void Blob(int index, const std::string& v) {
    sqlite3_bind_blob(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  // Steps to the end and resets: for statements that return no rows.
  Status Run(const char* what) {
    const int rc = Step();
    sqlite3_reset(stmt_);
    return rc == SQLITE_DONE ? OkStatus() : SqlError(db_, what);
  }
  void Reset() { sqlite3_reset(stmt_); }
  bool IsNull(int i) { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  std::string ColumnText(int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, i))) : "";
  }
  std::string ColumnBlob(int i) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, i))) : "";
  }
  int64_t ColumnInt(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_SQLITE_STATEMENT_H_
