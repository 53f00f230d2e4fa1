// Internal to the store module: the store's database connection, SQLite's or PostgreSQL's.
// The store's code and SQL are written once (SQLite's ?N parameters, SQL both engines take);
// Connection and Statement hand each call to the engine's own class (sqlite_connection.h,
// pg_connection.h), which have the same shape. Where the engines differ in SQL (the schema,
// how a writer takes the lock, a row's physical id), the store asks engine().
#ifndef EXPANSE_STORE_SQL_CONNECTION_H_
#define EXPANSE_STORE_SQL_CONNECTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/result.h"
#include "core/status.h"
#include "store/pg_connection.h"
#include "store/sqlite_connection.h"

namespace expanse::store::sqlite_internal {

enum class Engine { kSqlite, kPostgres };

// The SQL that opens a transaction. A writer takes the database's write lock at once, so two
// writers never both read a state and then both act on it: SQLite's BEGIN IMMEDIATE; on
// PostgreSQL one advisory lock, held to the transaction's end, that every writer of the store
// takes (the key is the store's own: "expanse" in ASCII).
// Every writer of a PostgreSQL store takes this lock first, for its transaction (BeginSql).
inline constexpr const char* kPgWritersLockSql = "SELECT pg_advisory_xact_lock(28561396714074981)";

inline std::string BeginSql(Engine engine, bool write) {
  // A reader sees one snapshot throughout, as in SQLite's deferred transaction (PostgreSQL's
  // default, READ COMMITTED, would give each statement its own); read-only, it never has to
  // be retried.
  if (!write)
    return engine == Engine::kSqlite ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
  return engine == Engine::kSqlite ? std::string("BEGIN IMMEDIATE")
                                   : std::string("BEGIN; ") + kPgWritersLockSql;
}

class Statement {
 public:
  explicit Statement(SqliteStatement statement) : engine_(std::move(statement)) {}
  explicit Statement(pg_internal::PgStatement statement) : engine_(std::move(statement)) {}

  template <typename... Args>
  Status BindAll(const Args&... args) {
    return std::visit([&](auto& s) { return s.BindAll(args...); }, engine_);
  }
  template <typename T>
  Status Bind(int index, const T& value) {
    return std::visit([&](auto& s) { return s.Bind(index, value); }, engine_);
  }
  Result<bool> Step() {
    return std::visit([](auto& s) { return s.Step(); }, engine_);
  }
  Status Run() {
    return std::visit([](auto& s) { return s.Run(); }, engine_);
  }
  void Reset() {
    std::visit([](auto& s) { s.Reset(); }, engine_);
  }
  int64_t ColumnInt(int column) const {
    return std::visit([&](const auto& s) { return s.ColumnInt(column); }, engine_);
  }
  std::string ColumnText(int column) const {
    return std::visit([&](const auto& s) { return s.ColumnText(column); }, engine_);
  }

 private:
  std::variant<SqliteStatement, pg_internal::PgStatement> engine_;
};

class Connection {
 public:
  explicit Connection(SqliteConnection connection) : engine_(std::move(connection)) {}
  explicit Connection(pg_internal::PgConnection connection) : engine_(std::move(connection)) {}

  Engine engine() const {
    return std::holds_alternative<SqliteConnection>(engine_) ? Engine::kSqlite : Engine::kPostgres;
  }
  // SQLite's connection, for what only SQLite has (PRAGMAs); null on PostgreSQL.
  SqliteConnection* sqlite() { return std::get_if<SqliteConnection>(&engine_); }

  Result<Statement> Prepare(std::string_view sql) {
    return std::visit(
        [&](auto& c) -> Result<Statement> {
          if constexpr (std::is_same_v<std::decay_t<decltype(c)>, SqliteConnection>) {
            EXPANSE_ASSIGN_OR_RETURN(SqliteStatement s, c.Prepare(sql));
            return Statement(std::move(s));
          } else {
            return Statement(c.Prepare(sql));
          }
        },
        engine_);
  }
  // Prepares `sql` and binds `args` to ?1, ?2, ...; step the result for its rows.
  template <typename... Args>
  Result<Statement> Query(std::string_view sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(Statement statement, Prepare(sql));
    EXPANSE_RETURN_IF_ERROR(statement.BindAll(args...));
    return statement;
  }
  // Prepares, binds and runs a statement that returns no rows.
  template <typename... Args>
  Status Execute(std::string_view sql, const Args&... args) {
    EXPANSE_ASSIGN_OR_RETURN(Statement statement, Query(sql, args...));
    return statement.Run();
  }
  // Constant SQL that may hold several statements; never with a value in it.
  Status ExecuteScript(const std::string& sql) {
    return std::visit([&](auto& c) { return c.ExecuteScript(sql); }, engine_);
  }
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const {
    return std::visit([](const auto& c) { return c.Changes(); }, engine_);
  }
  bool InTransaction() const {
    return std::visit([](const auto& c) { return c.InTransaction(); }, engine_);
  }
  void RollbackIfActive() {
    std::visit([](auto& c) { c.RollbackIfActive(); }, engine_);
  }

 private:
  std::variant<SqliteConnection, pg_internal::PgConnection> engine_;
};

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQL_CONNECTION_H_
