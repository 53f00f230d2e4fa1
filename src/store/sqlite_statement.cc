#include "store/sqlite_statement.h"

#include <sqlite3.h>

#include <utility>

#include "store/sqlite_error.h"

namespace expanse::store::sqlite_internal {
namespace {

// How much of a statement's SQL an error message quotes: enough to recognise it.
constexpr std::size_t kMaxSqlInMessage = 60;

}  // namespace

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : statement_(std::exchange(other.statement_, nullptr)), cached_(std::move(other.cached_)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    Release();
    statement_ = std::exchange(other.statement_, nullptr);
    cached_ = std::move(other.cached_);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { Release(); }

void SqliteStatement::Release() {
  if (!cached_ || cached_->orphaned) {
    sqlite3_finalize(statement_);
  } else {
    // Reset also ends the statement's read of the database, which an unfinished SELECT
    // would otherwise keep open; its return value repeats a step error already reported.
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
    cached_->in_use = false;
  }
  statement_ = nullptr;
  cached_.reset();
}

Status SqliteStatement::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(statement_, index, value);
  return rc == SQLITE_OK ? OkStatus() : Error(rc, "binding parameter " + std::to_string(index));
}

Status SqliteStatement::Bind(int index, std::string_view value) {
  // A default-constructed string_view has a null data(), which SQLite would bind as NULL;
  // an empty string is what the caller meant.
  const char* data = value.data() != nullptr ? value.data() : "";
  const int rc =
      sqlite3_bind_text64(statement_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return rc == SQLITE_OK ? OkStatus() : Error(rc, "binding parameter " + std::to_string(index));
}

Result<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  return Error(rc, "running");
}

Status SqliteStatement::Run() {
  EXPANSE_ASSIGN_OR_RETURN(const bool has_row, Step());
  if (has_row) {
    return InternalError("SQL statement \"" + SqlForMessage() + "\" returned a row; none expected");
  }
  return OkStatus();
}

void SqliteStatement::Reset() {
  // sqlite3_reset repeats the error of the last failed step, which Step() already reported.
  sqlite3_reset(statement_);
}

int64_t SqliteStatement::ColumnInt(int column) const {
  return sqlite3_column_int64(statement_, column);
}

std::string SqliteStatement::ColumnText(int column) const {
  // sqlite3_column_text before sqlite3_column_bytes: the documented order for a correct
  // length of the UTF-8 text.
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) {
    return "";
  }
  const int size = sqlite3_column_bytes(statement_, column);
  return {reinterpret_cast<const char*>(text), static_cast<std::size_t>(size)};
}

std::string SqliteStatement::SqlForMessage() const {
  // The SQL is our own constant text (values are bound, never spliced in), so it is safe
  // to show; runs of blanks and line breaks become one space.
  std::string sql;
  for (const char* c = sqlite3_sql(statement_); *c != '\0' && sql.size() < kMaxSqlInMessage; ++c) {
    const bool blank = *c == ' ' || *c == '\n' || *c == '\t';
    if (!blank) {
      sql += *c;
    } else if (!sql.empty() && sql.back() != ' ') {
      sql += ' ';
    }
  }
  return sql.size() < kMaxSqlInMessage ? sql : sql + "...";
}

Status SqliteStatement::Error(int rc, std::string_view doing) const {
  return SqliteStatus(sqlite3_db_handle(statement_), rc,
                      std::string(doing) + " SQL statement \"" + SqlForMessage() + "\"");
}

}  // namespace expanse::store::sqlite_internal
