#include "store/pg_connection.h"

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <string>

#include <libpq-fe.h>

namespace expanse::store::pg_internal {
namespace {

// PostgreSQL's type ids for the two parameter types the store binds (pg_type.dat).
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;
constexpr size_t kMaxTranslated = 512;
// Prepared statements kept per session; past it they are all deallocated and prepared anew.
constexpr size_t kMaxPrepared = 512;

// The first line of libpq's message, without its "ERROR:  " prefix.
std::string ServerText(const char* message) {
  std::string text = message != nullptr ? message : "";
  if (text.starts_with("ERROR:  "))
    text.erase(0, 8);
  if (const size_t end = text.find('\n'); end != std::string::npos)
    text.resize(end);
  return text;
}

// A failed statement's status, by its SQLSTATE (PostgreSQL's appendix A): the same codes the
// SQLite store gives for the same failures (sqlite_error.cc).
Status StatementStatus(const PGresult* result, pg_conn* conn, std::string_view doing) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state != nullptr ? state : "";
  const std::string message =
      std::string(doing) + ": " +
      ServerText(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn));
  if (code == "23505")  // unique_violation
    return AlreadyExistsError(message);
  if (code == "23503")  // foreign_key_violation
    return NotFoundError(message + " (a referenced row does not exist)");
  if (code == "23514" || code == "23502" || code == "22001" || code == "22021" ||
      code == "22P02")  // check, not null, too long, bad encoding, bad text for the type
    return InvalidArgumentError(message);
  if (code == "40001" || code == "40P01")  // serialization failure, deadlock
    return UnavailableError(message + " (a concurrent transaction conflicted; retry)")
        .WithReason("conflict");
  if (code == "55P03")  // lock_not_available: lock_timeout (SetUpSession) ran out
    return UnavailableError(message +
                            " (another server held the store's write lock too long; retry)")
        .WithReason("conflict");
  if (code == "57014")  // query_canceled: statement_timeout, or a DBA's pg_cancel_backend
    return UnavailableError(message + " (the statement was cancelled; retry)");
  if (code == "53100")  // disk_full
    return ResourceExhaustedError(message);
  if (code.starts_with("08") || code == "57P01" || code == "57P02" || code == "57P03" ||
      PQstatus(conn) != CONNECTION_OK)
    return UnavailableError(message + " (the database server went away; retry later)");
  return InternalError(message);
}

// What every session of the store sets: UTF-8 text (the store's), no NOTICEs (CREATE TABLE
// IF NOT EXISTS of a table that is there is not the store's error), and `session`'s settings.
//
// And bounds on waiting where the operator set none (their conninfo's options, the role's or
// the database's settings win): a replica whose host vanished mid-transaction holds the
// writers' lock until the server notices; without these every other replica's writers would
// queue behind it (each holding its store's only connection) for as long as TCP takes, about
// two hours. lock_timeout: a write waits at most 15 s for the lock and fails retryable (503);
// idle_in_transaction_session_timeout: the server ends a session idle inside a transaction for
// 60 s, which frees the lock; statement_timeout: a statement runs at most 120 s and fails
// retryable (503), since each store has one connection, and a runaway read on it (a job's
// millions of stack rows) would otherwise hold up every sign-in, heartbeat and write of the
// replica. Migrations wait and run without bound (ApplyMigrations).
bool SetUpSession(pg_conn* conn, const PgSessionOptions& session) {
  std::string sql =
      "SET client_encoding = 'UTF8'; SET client_min_messages = warning; "
      "SELECT set_config('lock_timeout', '15s', false) "
      "WHERE current_setting('lock_timeout') = '0'; "
      "SELECT set_config('idle_in_transaction_session_timeout', '60s', false) "
      "WHERE current_setting('idle_in_transaction_session_timeout') = '0'; "
      "SELECT set_config('statement_timeout', '120s', false) "
      "WHERE current_setting('statement_timeout') = '0'";
  if (session.asynchronous_commit)
    sql += "; SET synchronous_commit = off";
  if (session.index_scans)
    sql += "; SET enable_seqscan = off";
  PGresult* set = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(set);
  PQclear(set);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

}  // namespace

void PgStatement::Clear::operator()(pg_result* result) const { PQclear(result); }

Status PgStatement::Bind(int index, int64_t value) {
  if (index < 1 || index > 65535)
    return InvalidArgumentError("PostgreSQL: parameter " + std::to_string(index) + " out of range");
  if (params_.size() < static_cast<size_t>(index))
    params_.resize(static_cast<size_t>(index));
  params_[static_cast<size_t>(index) - 1] = {true, value, {}};
  return OkStatus();
}

Status PgStatement::Bind(int index, std::string_view value) {
  if (index < 1 || index > 65535)
    return InvalidArgumentError("PostgreSQL: parameter " + std::to_string(index) + " out of range");
  if (value.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(
        "PostgreSQL cannot store text with a NUL byte; the value was refused");
  }
  if (params_.size() < static_cast<size_t>(index))
    params_.resize(static_cast<size_t>(index));
  params_[static_cast<size_t>(index) - 1] = {false, 0, std::string(value)};
  return OkStatus();
}

Status PgStatement::Execute() {
  if (connection_ == nullptr)
    return FailedPreconditionError("PostgreSQL: the statement has no connection");
  EXPANSE_RETURN_IF_ERROR(connection_->EnsureConnected());
  pg_conn* conn = connection_->conn_;
  std::vector<Oid> types;
  std::vector<std::string> ints;
  std::vector<const char*> values;
  std::vector<int> lengths;
  ints.reserve(params_.size());
  for (const PgParam& p : params_) {
    if (p.is_int) {
      types.push_back(kInt8Oid);
      ints.push_back(std::to_string(p.int_value));
      values.push_back(ints.back().c_str());
      lengths.push_back(static_cast<int>(ints.back().size()));
    } else {
      types.push_back(kTextOid);
      values.push_back(p.text.c_str());
      lengths.push_back(static_cast<int>(p.text.size()));
    }
  }
  EXPANSE_ASSIGN_OR_RETURN(const std::string name, connection_->PreparedName(sql_, types));
  PGresult* result = PQexecPrepared(conn, name.c_str(), static_cast<int>(params_.size()),
                                    values.data(), lengths.data(),
                                    /*paramFormats=*/nullptr, /*resultFormat=*/0);
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Status error = StatementStatus(result, conn, "PostgreSQL");
    PQclear(result);
    return error;
  }
  result_.reset(result);
  executed_ = true;
  row_ = -1;
  rows_ = PQntuples(result);
  int64_t changed = 0;
  const char* tuples = PQcmdTuples(result);
  std::from_chars(tuples, tuples + std::char_traits<char>::length(tuples), changed);
  connection_->changes_ = changed;
  return OkStatus();
}

Result<bool> PgStatement::Step() {
  if (!executed_)
    EXPANSE_RETURN_IF_ERROR(Execute());
  if (row_ + 1 >= rows_) {
    row_ = rows_;
    return false;
  }
  ++row_;
  return true;
}

Status PgStatement::Run() {
  if (!executed_)
    return Execute();
  return OkStatus();
}

void PgStatement::Reset() {
  result_.reset();
  executed_ = false;
  row_ = -1;
  rows_ = 0;
}

int64_t PgStatement::ColumnInt(int column) const {
  if (!result_ || row_ < 0 || row_ >= rows_ || PQgetisnull(result_.get(), row_, column))
    return 0;
  const char* text = PQgetvalue(result_.get(), row_, column);
  const char* end = text + PQgetlength(result_.get(), row_, column);
  int64_t value = 0;
  const auto [at, error] = std::from_chars(text, end, value);
  return error == std::errc() && at == end ? value : 0;
}

std::string PgStatement::ColumnText(int column) const {
  if (!result_ || row_ < 0 || row_ >= rows_ || PQgetisnull(result_.get(), row_, column))
    return "";
  return std::string(PQgetvalue(result_.get(), row_, column),
                     static_cast<size_t>(PQgetlength(result_.get(), row_, column)));
}

Result<PgConnection> PgConnection::Open(const std::string& conninfo, PgSessionOptions session) {
  // Defaults before the operator's conninfo (expanded from "dbname"), which overrides them:
  // without them a connect (and each reconnect, PQreset) to a failed-over address that drops
  // packets waits ~2 min, and a statement whose server vanished waits ~15 min for TCP.
  // Keepalives notice a silent peer in ~60 s; tcp_user_timeout bounds unacknowledged sends.
  // (Unix sockets ignore the TCP ones.)
  const char* const keywords[] = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
  const char* const values[] = {"10", "1", "30", "10", "3", "60000", conninfo.c_str(), nullptr};
  pg_conn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr)
    return ResourceExhaustedError("PostgreSQL: out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    // libpq's reason names the host and port, never the password.
    const std::string why = ServerText(PQerrorMessage(conn));
    PQfinish(conn);
    return UnavailableError("PostgreSQL: cannot connect: " + why).WithReason("unreachable");
  }
  if (!SetUpSession(conn, session)) {
    const std::string why = ServerText(PQerrorMessage(conn));
    PQfinish(conn);
    return UnavailableError("PostgreSQL: setting up the connection: " + why);
  }
  return PgConnection(conn, session);
}

Status PgConnection::EnsureConnected() {
  if (conn_ == nullptr)
    return FailedPreconditionError("PostgreSQL: the connection was moved away");
  // An idle connection whose server went away (restarted, or ended the session) has a
  // readable socket: the server's last message, or its end. Reading it now marks the
  // connection broken, so it is replaced before this statement instead of failing it.
  // (The message and the end may take a read each.)
  const bool in_transaction = InTransaction();
  for (int reads = 0; reads < 4 && PQstatus(conn_) == CONNECTION_OK; ++reads) {
    pollfd socket{PQsocket(conn_), POLLIN, 0};
    if (poll(&socket, 1, 0) <= 0 || PQconsumeInput(conn_) == 0)
      break;
  }
  if (PQstatus(conn_) == CONNECTION_OK)
    return OkStatus();
  // Not inside a transaction, though: its earlier statements (and the writers' lock) went
  // with the old session, so the rest must fail, not run on a new one (a COMMIT there would
  // "succeed" with nothing to commit). The next call, outside it, connects again.
  if (in_transaction) {
    return UnavailableError(
               "PostgreSQL: the connection was lost inside a transaction; nothing of it was kept")
        .WithReason("unreachable");
  }
  // The server restarted or the network dropped: connect again, once per call, so a database
  // that is back serves the next request and one still down fails it fast (503).
  PQreset(conn_);
  prepared_.clear();  // the new session has none
  if (PQstatus(conn_) != CONNECTION_OK || !SetUpSession(conn_, session_)) {
    return UnavailableError("PostgreSQL: the database is unreachable: " +
                            ServerText(PQerrorMessage(conn_)))
        .WithReason("unreachable");
  }
  return OkStatus();
}

PgConnection::PgConnection(PgConnection&& other) noexcept
    : conn_(other.conn_),
      session_(other.session_),
      translated_(std::move(other.translated_)),
      prepared_(std::move(other.prepared_)),
      next_prepared_(other.next_prepared_),
      changes_(other.changes_) {
  other.conn_ = nullptr;
}

PgConnection& PgConnection::operator=(PgConnection&& other) noexcept {
  if (this != &other) {
    if (conn_ != nullptr)
      PQfinish(conn_);
    conn_ = other.conn_;
    session_ = other.session_;
    translated_ = std::move(other.translated_);
    prepared_ = std::move(other.prepared_);
    next_prepared_ = other.next_prepared_;
    changes_ = other.changes_;
    other.conn_ = nullptr;
  }
  return *this;
}

PgConnection::~PgConnection() {
  if (conn_ != nullptr)
    PQfinish(conn_);
}

std::string PgConnection::TranslateParameters(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int next = 0;  // the last parameter number given or implied
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote != 0) {
      out += c;
      if (c == quote)
        quote = 0;  // a doubled quote re-enters at once: same result
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {  // a comment, to its line's end
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    size_t j = i + 1;
    int number = 0;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9' && number < 100000)
      number = number * 10 + (sql[j++] - '0');
    if (j == i + 1)
      number = next + 1;  // a bare ?: the next one, as SQLite numbers them
    next = std::max(next, number);
    out += '$';
    out += std::to_string(number);
    i = j - 1;
  }
  return out;
}

const std::string& PgConnection::Translated(std::string_view sql) {
  auto it = translated_.find(std::string(sql));
  if (it != translated_.end())
    return it->second;
  if (translated_.size() >= kMaxTranslated)
    translated_.clear();
  return translated_.emplace(std::string(sql), TranslateParameters(sql)).first->second;
}

Result<std::string> PgConnection::PreparedName(const std::string& sql,
                                               const std::vector<unsigned>& types) {
  std::string key = sql;
  key.push_back('\0');
  for (const unsigned type : types)
    key += std::to_string(type) + ",";
  if (auto it = prepared_.find(key); it != prepared_.end())
    return it->second;
  if (prepared_.size() >= kMaxPrepared) {
    // Outside a transaction it always succeeds; inside a failed one the names stay on the
    // server, harmlessly, since none is used again.
    PQclear(PQexec(conn_, "DEALLOCATE ALL"));
    prepared_.clear();
  }
  std::string name = "expanse_" + std::to_string(next_prepared_++);
  PGresult* result =
      PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(types.size()), types.data());
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK) {
    Status error = StatementStatus(result, conn_, "PostgreSQL");
    PQclear(result);
    return error;
  }
  PQclear(result);
  prepared_.emplace(std::move(key), name);
  return name;
}

Status PgConnection::ExecuteScript(const std::string& sql) {
  EXPANSE_RETURN_IF_ERROR(EnsureConnected());
  PGresult* result = PQexec(conn_, sql.c_str());
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  Status out = OkStatus();
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY)
    out = StatementStatus(result, conn_, "PostgreSQL");
  PQclear(result);
  return out;
}

bool PgConnection::InTransaction() const {
  if (conn_ == nullptr)
    return false;
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

void PgConnection::RollbackIfActive() {
  if (InTransaction())
    PQclear(PQexec(conn_, "ROLLBACK"));
}

}  // namespace expanse::store::pg_internal
