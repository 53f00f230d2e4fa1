// The libpq connection against a real PostgreSQL server started for these tests
// (pg_test_server.h): values round-trip exactly, SQLite's parameter syntax runs unchanged,
// failures map to the same status codes the SQLite store gives.
#include "store/pg_connection.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "store/pg_test_server.h"

namespace expanse::store::pg_internal {
namespace pg_connection_test {
namespace {

class PgConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = PgConnection::Open(testing::PgTestServer::Shared().NewDatabase());
    ASSERT_TRUE(opened.ok()) << opened.status();
    db_ = std::make_unique<PgConnection>(std::move(*opened));
    ASSERT_TRUE(db_->ExecuteScript("CREATE TABLE t (id BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL "
                                   "CHECK (n >= 0), s TEXT NOT NULL UNIQUE);"
                                   "CREATE TABLE child (t_id BIGINT NOT NULL REFERENCES t (id))")
                    .ok());
  }
  std::unique_ptr<PgConnection> db_;
};

TEST(PgParametersTest, SqliteNumberedParametersBecomePostgresOnesOutsideQuotes) {
  EXPECT_EQ(PgConnection::TranslateParameters("SELECT a FROM t WHERE b = ?1 AND c = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = $12");
  EXPECT_EQ(PgConnection::TranslateParameters("VALUES (?, ?, ?2)"), "VALUES ($1, $2, $2)");
  EXPECT_EQ(PgConnection::TranslateParameters("SELECT '?1', \"a?2\", 'it''s ?3' WHERE x = ?1"),
            "SELECT '?1', \"a?2\", 'it''s ?3' WHERE x = $1");
  EXPECT_EQ(PgConnection::TranslateParameters("SELECT 1 -- why ?1\nWHERE y = ?2"),
            "SELECT 1 -- why ?1\nWHERE y = $2");
}

TEST_F(PgConnectionTest, ValuesRoundTripExactly) {
  const std::string odd = "quote ' double \" backslash \\ semicolon; -- é 漢 \x01";
  ASSERT_TRUE(
      db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", int64_t{9'007'199'254'740'993}, odd)
          .ok());
  EXPECT_EQ(db_->Changes(), 1);
  auto rows = db_->Query("SELECT id, n, s, NULL FROM t WHERE s = ?1", odd);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(*rows->Step());
  EXPECT_EQ(rows->ColumnInt(0), 1);
  EXPECT_EQ(rows->ColumnInt(1), 9'007'199'254'740'993);
  EXPECT_EQ(rows->ColumnText(2), odd);
  EXPECT_EQ(rows->ColumnText(3), "");
  EXPECT_EQ(rows->ColumnInt(3), 0);
  EXPECT_FALSE(*rows->Step());
  // RETURNING gives the new row's id, as the store reads it on both engines.
  auto returned = db_->Query("INSERT INTO t (n, s) VALUES (?1, ?2) RETURNING id", 5, "b");
  ASSERT_TRUE(returned.ok()) << returned.status();
  ASSERT_TRUE(*returned->Step());
  EXPECT_EQ(returned->ColumnInt(0), 2);
  ASSERT_TRUE(db_->Execute("UPDATE t SET n = n + 1").ok());
  EXPECT_EQ(db_->Changes(), 2);
}

TEST_F(PgConnectionTest, FailuresHaveTheSqliteStoresCodes) {
  ASSERT_TRUE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "a").ok());
  EXPECT_EQ(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 2, "a").code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", -1, "c").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(db_->Execute("INSERT INTO child (t_id) VALUES (?1)", 99).code(), StatusCode::kNotFound);
  const Status nul =
      db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 3, std::string_view("a\0b", 3));
  EXPECT_EQ(nul.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nul.message().find("NUL"), std::string::npos);
  EXPECT_EQ(db_->Execute("SELECT * FROM no_such_table").code(), StatusCode::kInternal);
}

TEST_F(PgConnectionTest, TransactionsRollBackWhole) {
  ASSERT_TRUE(db_->ExecuteScript("BEGIN").ok());
  EXPECT_TRUE(db_->InTransaction());
  ASSERT_TRUE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "a").ok());
  EXPECT_FALSE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "a").ok());
  EXPECT_TRUE(db_->InTransaction());  // failed, still open until rolled back
  db_->RollbackIfActive();
  EXPECT_FALSE(db_->InTransaction());
  auto rows = db_->Query("SELECT count(*) FROM t");
  ASSERT_TRUE(rows.ok() && *rows->Step());
  EXPECT_EQ(rows->ColumnInt(0), 0);
}

TEST_F(PgConnectionTest, ARestartedServerIsUnavailableThenServesAgain) {
  ASSERT_TRUE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "kept").ok());
  testing::PgTestServer::Shared().Stop();
  const Status down = db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 2, "lost");
  EXPECT_EQ(down.code(), StatusCode::kUnavailable) << down;
  EXPECT_EQ(db_->Execute("SELECT 1").code(), StatusCode::kUnavailable);  // still away
  testing::PgTestServer::Shared().Start();
  auto rows = db_->Query("SELECT s FROM t ORDER BY id");  // connected again by itself
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(*rows->Step());
  EXPECT_EQ(rows->ColumnText(0), "kept");
  EXPECT_FALSE(*rows->Step());
}

// A setting's value and where it came from ("session": set by the connection).
std::pair<std::string, std::string> Setting(PgConnection& db, const char* name) {
  auto rows = db.Query("SELECT setting, source FROM pg_settings WHERE name = ?1", name);
  if (!rows.ok())
    return {"unread", rows.status().ToString()};
  Result<bool> row = rows->Step();
  if (!row.ok() || !*row)
    return {"unread", row.status().ToString()};
  return {rows->ColumnText(0), rows->ColumnText(1)};
}

const std::pair<std::string, std::string> kOffForTheSession{"off", "session"};

TEST_F(PgConnectionTest, SessionOptionsAreTheSessionsOwnAndOutliveAReconnect) {
  // By default the server's settings (and their source) are left alone.
  EXPECT_NE(Setting(*db_, "synchronous_commit").second, "session");
  EXPECT_EQ(Setting(*db_, "enable_seqscan"),
            std::make_pair(std::string("on"), std::string("default")));
  auto opened = PgConnection::Open(testing::PgTestServer::Shared().NewDatabase(),
                                   {.asynchronous_commit = true, .index_scans = true});
  ASSERT_TRUE(opened.ok()) << opened.status();
  PgConnection ledger = std::move(*opened);
  EXPECT_EQ(Setting(ledger, "synchronous_commit"), kOffForTheSession);
  EXPECT_EQ(Setting(ledger, "enable_seqscan"), kOffForTheSession);
  // Its backend ended from outside: a statement soon connects again (at once when the end
  // was read first, else after failing once), and the new session has the same settings.
  auto pid = ledger.Query("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(pid->Step().value_or(false));
  auto ended = db_->Query("SELECT pg_terminate_backend(?1::int)", pid->ColumnInt(0));
  ASSERT_TRUE(ended.ok());
  ASSERT_TRUE(ended->Step().value_or(false));
  ASSERT_EQ(ended->ColumnText(0), "t");
  Status first = ledger.Execute("SELECT 1");
  for (int i = 0; i < 3 && !first.ok(); ++i)
    first = ledger.Execute("SELECT 1");
  ASSERT_TRUE(first.ok()) << first;
  EXPECT_EQ(Setting(ledger, "synchronous_commit"), kOffForTheSession);
  EXPECT_EQ(Setting(ledger, "enable_seqscan"), kOffForTheSession);
  auto new_pid = ledger.Query("SELECT pg_backend_pid()");
  ASSERT_TRUE(new_pid.ok());
  ASSERT_TRUE(new_pid->Step().value_or(false));
  EXPECT_NE(new_pid->ColumnInt(0), pid->ColumnInt(0));
}

// Waits are bounded where the operator bounded nothing (a writer behind a vanished replica's
// lock), and left as the operator set them otherwise (conninfo options here; a role's or a
// database's settings alike).
TEST_F(PgConnectionTest, WaitsAreBoundedUnlessTheOperatorSetTheBounds) {
  EXPECT_EQ(Setting(*db_, "lock_timeout"),
            std::make_pair(std::string("15000"), std::string("session")));
  EXPECT_EQ(Setting(*db_, "idle_in_transaction_session_timeout"),
            std::make_pair(std::string("60000"), std::string("session")));
  // And so is a statement: the store's one connection is not held by a runaway read.
  EXPECT_EQ(Setting(*db_, "statement_timeout"),
            std::make_pair(std::string("120000"), std::string("session")));
  auto opened = PgConnection::Open(testing::PgTestServer::Shared().NewDatabase() +
                                   " options='-c lock_timeout=250 -c statement_timeout=900'");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(Setting(*opened, "lock_timeout").first, "250");
  EXPECT_EQ(Setting(*opened, "statement_timeout").first, "900");
  auto uri = PgConnection::Open(
      "postgresql:///postgres?host=" + testing::PgTestServer::Shared().directory() +
      "&port=" + std::to_string(testing::PgTestServer::kPort) + "&user=postgres");
  ASSERT_TRUE(uri.ok()) << uri.status();  // a URI is expanded as a key=value string is
  EXPECT_EQ(Setting(*uri, "lock_timeout").first, "15000");
}

// A connection left idle while the server restarted fails no statement afterwards: the end
// of its session is read before the next one, which connects again first.
TEST_F(PgConnectionTest, AConnectionIdleThroughARestartServesTheNextStatement) {
  ASSERT_TRUE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "before").ok());
  testing::PgTestServer::Shared().Stop();
  testing::PgTestServer::Shared().Start();
  const Status after = db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 2, "after");
  EXPECT_TRUE(after.ok()) << after;
  auto rows = db_->Query("SELECT count(*) FROM t");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(rows->Step().value_or(false));
  EXPECT_EQ(rows->ColumnInt(0), 2);
}

// A transaction whose session went away between two of its statements fails as a whole: its
// COMMIT is not run on a new session, where it would "succeed" with nothing to commit.
TEST_F(PgConnectionTest, ATransactionWhoseSessionWentAwayFailsWhole) {
  ASSERT_TRUE(db_->ExecuteScript("BEGIN").ok());
  ASSERT_TRUE(db_->Execute("INSERT INTO t (n, s) VALUES (?1, ?2)", 1, "lost").ok());
  testing::PgTestServer::Shared().Stop();
  testing::PgTestServer::Shared().Start();
  const Status committed = db_->ExecuteScript("COMMIT");
  EXPECT_EQ(committed.code(), StatusCode::kUnavailable) << committed;
  db_->RollbackIfActive();
  auto rows = db_->Query("SELECT count(*) FROM t");  // outside it: connected again
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(rows->Step().value_or(false));
  EXPECT_EQ(rows->ColumnInt(0), 0);
}

TEST(PgConnectionOpenTest, AnUnreachableServerIsUnavailableWithoutThePassword) {
  auto opened = PgConnection::Open("host=/nonexistent port=1 user=u password=hunter2 dbname=x");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(opened.status().message().find("hunter2"), std::string::npos)
      << opened.status().message();
}

}  // namespace
}  // namespace pg_connection_test
}  // namespace expanse::store::pg_internal
