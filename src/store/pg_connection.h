// Internal to the store module: one PostgreSQL connection through libpq, with the same shape
// as the SQLite connection (sqlite_connection.h) so that one store's SQL and code can run on
// either engine: Query and Execute take the statement's text and its arguments, and the rows
// come back one at a time through Step, ColumnInt and ColumnText.
//
// The SQL is written once, with SQLite's numbered parameters (?1, ?2, ...); PostgreSQL's are
// $1, $2, ..., so the text is translated when it is first seen (outside quoted literals and
// identifiers) and the translation kept. Values only ever reach SQL as parameters: int64_t as
// bigint, strings as text (PostgreSQL's text cannot hold a NUL byte: such a value is refused
// with kInvalidArgument rather than cut).
//
// A PgConnection is not thread-safe; the store serialises its use, as it does SQLite's.
#ifndef EXPANSE_STORE_PG_CONNECTION_H_
#define EXPANSE_STORE_PG_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/status.h"

struct pg_conn;
struct pg_result;

namespace expanse::store::pg_internal {

// One bound parameter: a bigint or a text.
struct PgParam {
  bool is_int = false;
  int64_t int_value = 0;
  std::string text;
};

// The rows of one executed statement, read in order. PostgreSQL sends them all at once, so
// Step only moves a cursor.
class PgRows {
 public:
  PgRows() = default;
  explicit PgRows(pg_result* result);
  PgRows(PgRows&&) noexcept = default;
  PgRows& operator=(PgRows&&) noexcept = default;

  // true: a row is ready for the Column accessors; false: no more rows.
  Result<bool> Step();
  // For statements without rows: already run, so always ok (the SQLite shape's Run).
  Status Run() { return OkStatus(); }
  // The column as an integer; 0 for NULL or text that is not one (PostgreSQL's bigint, and
  // the 0/1 the schema keeps booleans as, always are).
  int64_t ColumnInt(int column) const;
  // The column's text; "" for NULL.
  std::string ColumnText(int column) const;
  // Rows the statement inserted, updated or deleted (its command tag's count).
  int64_t Changes() const;

 private:
  struct Clear {
    void operator()(pg_result* result) const;
  };
  std::unique_ptr<pg_result, Clear> result_;
  int row_ = -1;
  int rows_ = 0;
};

class PgConnection {
 public:
  // Connects with a libpq connection string or URI ("postgresql://user@host/db",
  // "host=/run/postgresql dbname=expanse"). kUnavailable when the server cannot be reached or
  // refuses, with libpq's reason; the password, if any, never appears in the message.
  static Result<PgConnection> Open(const std::string& conninfo);

  PgConnection(PgConnection&& other) noexcept;
  PgConnection& operator=(PgConnection&& other) noexcept;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // Runs `sql` with `args` bound to ?1, ?2, ... in order; step the result for its rows.
  template <typename... Args>
  Result<PgRows> Query(std::string_view sql, const Args&... args) {
    std::vector<PgParam> params;
    params.reserve(sizeof...(args));
    (params.push_back(ToParam(args)), ...);
    return Run(sql, params);
  }
  // Runs a statement that returns no rows.
  template <typename... Args>
  Status Execute(std::string_view sql, const Args&... args) {
    Result<PgRows> rows = Query(sql, args...);
    if (!rows.ok())
      return rows.status();
    changes_ = rows->Changes();
    return OkStatus();
  }
  // Runs constant SQL that may hold several statements (migrations, BEGIN/COMMIT). Never
  // pass text that contains a value: it is not parameterised.
  Status ExecuteScript(const std::string& sql);
  // Rows changed by the last Execute.
  int64_t Changes() const { return changes_; }
  // True inside BEGIN ... COMMIT/ROLLBACK (also after a failed statement in one).
  bool InTransaction() const;
  // Ends an open transaction without its changes; for error paths.
  void RollbackIfActive();

  // SQLite's numbered parameters (?1, ?2 or a bare ?) as PostgreSQL's ($1, $2); quoted
  // literals and identifiers are left alone. Exposed for its tests.
  static std::string TranslateParameters(std::string_view sql);

 private:
  explicit PgConnection(pg_conn* conn) : conn_(conn) {}
  static PgParam ToParam(int64_t value) { return {true, value, {}}; }
  static PgParam ToParam(std::string_view value) { return {false, 0, std::string(value)}; }
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  static PgParam ToParam(T value) {
    return ToParam(static_cast<int64_t>(value));
  }
  Result<PgRows> Run(std::string_view sql, const std::vector<PgParam>& params);
  const std::string& Translated(std::string_view sql);

  pg_conn* conn_ = nullptr;  // null only after a move
  // Translated SQL by its SQLite text (a store's statements are constant text; bounded like
  // SQLite's statement cache, for texts built with a variable number of parameters).
  std::unordered_map<std::string, std::string> translated_;
  int64_t changes_ = 0;
};

}  // namespace expanse::store::pg_internal

#endif  // EXPANSE_STORE_PG_CONNECTION_H_
