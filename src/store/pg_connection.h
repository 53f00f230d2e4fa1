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

class PgConnection;

// One statement: its parameters are bound (Bind, BindAll), it runs at the first Step or Run,
// and its rows (PostgreSQL sends them all at once) are then read in order. Reset makes it
// ready to run again with new values, as a batch does with SQLite's prepared statements.
class PgStatement {
 public:
  PgStatement(PgConnection* connection, std::string sql)
      : connection_(connection), sql_(std::move(sql)) {}
  PgStatement(PgStatement&&) noexcept = default;
  PgStatement& operator=(PgStatement&&) noexcept = default;

  // Binds the arguments to ?1, ?2, ... in order.
  template <typename... Args>
  Status BindAll(const Args&... args) {
    int index = 0;
    Status status;
    ((status = status.ok() ? Bind(++index, args) : status), ...);
    return status;
  }
  Status Bind(int index, int64_t value);
  Status Bind(int index, std::string_view value);
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>) Status
      Bind(int index, T value) {
    return Bind(index, static_cast<int64_t>(value));
  }
  Status Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Status Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }

  // Runs the statement if it has not run; true: a row is ready for the Column accessors.
  Result<bool> Step();
  // Runs a statement that returns no rows.
  Status Run();
  // Ready to run again; the bound values stay until bound anew.
  void Reset();
  // The column as an integer; 0 for NULL or text that is not one (PostgreSQL's bigint, and
  // the 0/1 the schema keeps booleans as, always are).
  int64_t ColumnInt(int column) const;
  // The column's text; "" for NULL.
  std::string ColumnText(int column) const;

 private:
  struct Clear {
    void operator()(pg_result* result) const;
  };
  Status Execute();

  PgConnection* connection_;
  std::string sql_;  // translated to PostgreSQL's parameters
  std::vector<PgParam> params_;
  std::unique_ptr<pg_result, Clear> result_;
  bool executed_ = false;
  int row_ = -1;
  int rows_ = 0;
};

// A session's settings beside the store's own; the defaults leave the server's as the site
// configured them.
struct PgSessionOptions {
  // synchronous_commit = off: COMMIT returns at once and the WAL reaches the disk a moment
  // later, so a crash of PostgreSQL (not of the client) can lose the last fraction of a second
  // of commits, never half of one. Only for what may be lost that way (the ingest batch
  // ledger, sqlite_store_impl.h). Otherwise a commit waits as the site's synchronous_commit
  // says (PostgreSQL's default: the WAL on disk; remote_apply with a standby stays so).
  bool asynchronous_commit = false;
  // enable_seqscan = off: for a session whose every statement finds its rows through an index
  // (by primary or unique key). The planner then takes the index however small the table
  // looked when it planned: a prepared statement's generic plan, made once while a table was
  // nearly empty, would otherwise scan it whole for as long as the session lives (until
  // autovacuum's next ANALYZE, if the table's growth triggers one). A statement with no index
  // to use still runs, by a scan.
  bool index_scans = false;
};

class PgConnection {
 public:
  // Connects with a libpq connection string or URI ("postgresql://user@host/db",
  // "host=/run/postgresql dbname=expanse"). kUnavailable when the server cannot be reached or
  // refuses, with libpq's reason; the password, if any, never appears in the message. The
  // session's settings (`session` among them) are made again whenever it reconnects.
  static Result<PgConnection> Open(const std::string& conninfo, PgSessionOptions session = {});

  PgConnection(PgConnection&& other) noexcept;
  PgConnection& operator=(PgConnection&& other) noexcept;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // A statement for `sql`, to bind and run.
  PgStatement Prepare(std::string_view sql) { return PgStatement(this, Translated(sql)); }
  // Prepares `sql` and binds `args` to ?1, ?2, ...; step the result for its rows.
  template <typename... Args>
  Result<PgStatement> Query(std::string_view sql, const Args&... args) {
    PgStatement statement = Prepare(sql);
    EXPANSE_RETURN_IF_ERROR(statement.BindAll(args...));
    return statement;
  }
  // Runs a statement that returns no rows.
  template <typename... Args>
  Status Execute(std::string_view sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(PgStatement statement, Query(sql, args...));
    return statement.Run();
  }
  // Runs constant SQL that may hold several statements (migrations, BEGIN/COMMIT). Never
  // pass text that contains a value: it is not parameterised.
  Status ExecuteScript(const std::string& sql);
  // Rows inserted, updated or deleted by the last statement run.
  int64_t Changes() const { return changes_; }
  // True inside BEGIN ... COMMIT/ROLLBACK (also after a failed statement in one).
  bool InTransaction() const;
  // Ends an open transaction without its changes; for error paths.
  void RollbackIfActive();

  // SQLite's numbered parameters (?1, ?2 or a bare ?) as PostgreSQL's ($1, $2); quoted
  // literals and identifiers are left alone. Exposed for its tests.
  static std::string TranslateParameters(std::string_view sql);

 private:
  friend class PgStatement;
  PgConnection(pg_conn* conn, PgSessionOptions session) : conn_(conn), session_(session) {}
  const std::string& Translated(std::string_view sql);
  // The name of the server-side prepared statement for `sql` with parameters of `types`,
  // preparing it on first use. Parsing and planning a statement once per connection rather
  // than at every run halves PostgreSQL's work for the short statements of ingest.
  Result<std::string> PreparedName(const std::string& sql, const std::vector<unsigned>& types);
  // Connects again when the connection broke; kUnavailable when the server is still away.
  Status EnsureConnected();

  pg_conn* conn_ = nullptr;  // null only after a move
  PgSessionOptions session_{};
  // Translated SQL by its SQLite text (a store's statements are constant text; bounded like
  // SQLite's statement cache, for texts built with a variable number of parameters).
  std::unordered_map<std::string, std::string> translated_;
  // Prepared statements of this session by their text and parameter types; names are never
  // reused (a session that outlives its map keeps no stale name), and the map is forgotten
  // when the connection is made again (a new session has none).
  std::unordered_map<std::string, std::string> prepared_;
  uint64_t next_prepared_ = 0;
  int64_t changes_ = 0;
};

}  // namespace expanse::store::pg_internal

#endif  // EXPANSE_STORE_PG_CONNECTION_H_
