// The connection's statement cache: reuse must not leak bindings or cursor state from one
// use to the next, and a statement still being stepped must not be handed out twice.
#include "store/sqlite_connection.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::store::sqlite_internal {
namespace sqlite_connection_test {
namespace {

SqliteConnection MemoryDb() {
  Result<SqliteConnection> db = SqliteConnection::Open(":memory:", 1000);
  EXPECT_TRUE(db.ok()) << db.status();
  return std::move(db).value();
}

// Creates a table of three rows, 1 to 3, and returns the SQL that reads them in order.
std::string ThreeRows(SqliteConnection& db) {
  EXPECT_TRUE(
      db.ExecuteScript("CREATE TABLE t(v INTEGER); INSERT INTO t VALUES (1), (2), (3);").ok());
  return "SELECT v FROM t ORDER BY v";
}

TEST(SqliteConnectionTest, ReusedStatementStartsWithoutTheLastBindings) {
  SqliteConnection db = MemoryDb();
  {
    Result<SqliteStatement> first = db.Query("SELECT ?1", std::string_view("bound once"));
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE(*first->Step());
    EXPECT_EQ(first->ColumnText(0), "bound once");
  }
  // The same text again, unbound: NULL, which reads as "", not the earlier value.
  Result<SqliteStatement> second = db.Prepare("SELECT ?1");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(*second->Step());
  EXPECT_EQ(second->ColumnText(0), "");
}

TEST(SqliteConnectionTest, ReusedStatementStartsFromTheFirstRow) {
  SqliteConnection db = MemoryDb();
  const std::string sql = ThreeRows(db);
  {
    Result<SqliteStatement> partly = db.Prepare(sql);
    ASSERT_TRUE(partly.ok());
    ASSERT_TRUE(*partly->Step());
    ASSERT_TRUE(*partly->Step());
    EXPECT_EQ(partly->ColumnInt(0), 2);
  }  // left on the second row
  Result<SqliteStatement> again = db.Prepare(sql);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(*again->Step());
  EXPECT_EQ(again->ColumnInt(0), 1);
}

TEST(SqliteConnectionTest, SameTextWhileInUseGetsItsOwnStatement) {
  SqliteConnection db = MemoryDb();
  const std::string sql = ThreeRows(db);
  Result<SqliteStatement> outer = db.Prepare(sql);
  ASSERT_TRUE(outer.ok());
  std::vector<int64_t> pairs;
  while (*outer->Step()) {
    Result<SqliteStatement> inner = db.Prepare(sql);
    ASSERT_TRUE(inner.ok());
    while (*inner->Step())
      pairs.push_back(outer->ColumnInt(0) * 10 + inner->ColumnInt(0));
  }
  EXPECT_EQ(pairs, (std::vector<int64_t>{11, 12, 13, 21, 22, 23, 31, 32, 33}));
}

TEST(SqliteConnectionTest, MovedStatementIsReturnedOnce) {
  SqliteConnection db = MemoryDb();
  {
    Result<SqliteStatement> a = db.Prepare("SELECT 7");
    ASSERT_TRUE(a.ok());
    SqliteStatement moved = std::move(a).value();
    Result<SqliteStatement> b = db.Prepare("SELECT 7");  // `moved` still holds the cached one
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(*moved.Step());
    ASSERT_TRUE(*b->Step());
    EXPECT_EQ(moved.ColumnInt(0) + b->ColumnInt(0), 14);
  }
  Result<SqliteStatement> c = db.Prepare("SELECT 7");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(*c->Step());
  EXPECT_EQ(c->ColumnInt(0), 7);
}

TEST(SqliteConnectionTest, TransactionsRunThroughCachedStatements) {
  SqliteConnection db = MemoryDb();
  ASSERT_TRUE(db.ExecuteScript("CREATE TABLE t(v INTEGER)").ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(db.Execute("BEGIN IMMEDIATE").ok());
    EXPECT_TRUE(db.InTransaction());
    ASSERT_TRUE(db.Execute("INSERT INTO t VALUES (?1)", int64_t{i}).ok());
    ASSERT_TRUE(db.Execute("COMMIT").ok());
    EXPECT_FALSE(db.InTransaction());
  }
  Result<SqliteStatement> sum = db.Prepare("SELECT sum(v) FROM t");
  ASSERT_TRUE(sum.ok());
  ASSERT_TRUE(*sum->Step());
  EXPECT_EQ(sum->ColumnInt(0), 3);
}

TEST(SqliteConnectionTest, BadSqlIsNotCached) {
  SqliteConnection db = MemoryDb();
  for (int i = 0; i < 2; ++i) {
    Result<SqliteStatement> bad = db.Prepare("SELEC 1");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("SELEC 1"), std::string::npos) << bad.status();
  }
}

TEST(SqliteConnectionTest, CacheKeepsTheRecentlyUsedWithinItsBound) {
  SqliteConnection db = MemoryDb();
  for (int i = 0; i < 300; ++i) {
    // A text built with a varying number of parameters, as IN lists are.
    std::string sql = "SELECT 1";
    for (int p = 0; p < i; ++p)
      sql += " + ?" + std::to_string(p + 1) + " * 0";
    Result<SqliteStatement> varying = db.Prepare(sql);
    ASSERT_TRUE(varying.ok()) << varying.status();
    Result<SqliteStatement> hot = db.Prepare("SELECT 2");
    ASSERT_TRUE(hot.ok());
    ASSERT_TRUE(*hot->Step());
    EXPECT_EQ(hot->ColumnInt(0), 2);
  }
  EXPECT_LE(db.cached_statements(), 128u);
  EXPECT_GE(db.cached_statements(), 100u);
}

// A statement still borrowed when its connection goes is finalized by its borrower (under
// ASan, a use after free otherwise).
TEST(SqliteConnectionTest, StatementBorrowedPastItsConnectionIsFinalizedByIt) {
  std::optional<SqliteStatement> kept;
  {
    SqliteConnection db = MemoryDb();
    Result<SqliteStatement> statement = db.Prepare("SELECT 3");
    ASSERT_TRUE(statement.ok());
    kept.emplace(std::move(statement).value());
    SqliteConnection other = MemoryDb();
    db = std::move(other);  // the first connection's cache goes here
  }
  // sqlite3_close_v2 keeps the closed connection as a zombie until its last statement goes.
  Result<bool> row = kept->Step();
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE(*row);
  EXPECT_EQ(kept->ColumnInt(0), 3);
  kept.reset();
}

}  // namespace
}  // namespace sqlite_connection_test
}  // namespace expanse::store::sqlite_internal
