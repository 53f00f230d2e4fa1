// Opening the SQLite store: options, pragmas, migrations, locking and thread safety.
// The methods of store.h are tested in sqlite_store_<area>_test.cc.
#include "store/sqlite_store.h"

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_test {
namespace {

using Connection = sqlite_internal::SqliteConnection;
using sqlite_internal::LatestSchemaVersion;
using sqlite_internal::Migrations;
using Statement = sqlite_internal::SqliteStatement;
using store_testing::kNow;
using store_testing::TempDir;
using ::testing::HasSubstr;

Result<std::unique_ptr<Store>> Open(const std::string& path, int busy_timeout_ms = 5000) {
  SqliteStoreOptions options;
  options.path = path;
  options.busy_timeout_ms = busy_timeout_ms;
  return OpenSqliteStore(options);
}

// A second, raw connection to the file, as another tool or process would have.
Connection RawConnection(const std::string& path) {
  Result<Connection> db = Connection::Open(path, 5000);
  EXPECT_TRUE(db.ok()) << db.status();
  return std::move(db).value();
}

std::string QueryText(Connection& db, const std::string& sql) {
  Result<Statement> statement = db.Prepare(sql);
  if (!statement.ok()) {
    return "<error> " + statement.status().ToString();
  }
  Result<bool> has_row = statement->Step();
  if (!has_row.ok()) {
    return "<error> " + has_row.status().ToString();
  }
  return *has_row ? statement->ColumnText(0) : "<no row>";
}

// "version@applied_at_ms" for every row of schema_migrations, oldest first.
std::vector<std::string> MigrationRows(Connection& db) {
  std::vector<std::string> rows;
  Result<Statement> statement =
      db.Prepare("SELECT version, applied_at_ms FROM schema_migrations ORDER BY version");
  EXPECT_TRUE(statement.ok()) << statement.status();
  while (statement.ok()) {
    Result<bool> has_row = statement->Step();
    EXPECT_TRUE(has_row.ok()) << has_row.status();
    if (!has_row.ok() || !*has_row) {
      break;
    }
    rows.push_back(std::to_string(statement->ColumnInt(0)) + "@" +
                   std::to_string(statement->ColumnInt(1)));
  }
  return rows;
}

TEST(OpenSqliteStoreTest, RefusesBadOptions) {
  EXPECT_EQ(Open("").status(),
            InvalidArgumentError("SQLite store path is empty; give a file name or \":memory:\""));
  EXPECT_EQ(Open(std::string("a\0b", 3)).status(),
            InvalidArgumentError("SQLite store path \"a\\x00b\" contains a NUL byte"));
  EXPECT_EQ(Open(":memory:", -1).status(),
            InvalidArgumentError("SQLite busy timeout is -1 ms; it must not be negative"));
}

TEST(OpenSqliteStoreTest, MissingDirectoryIsAFailedPreconditionNamingThePath) {
  const TempDir dir;
  const std::string path = dir.path() + "/no-such-dir/store.db";
  const Status status = Open(path).status();
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("SQLite store \"" + path.substr(0, 80)));
  EXPECT_THAT(status.message(), HasSubstr("unable to open database file"));
}

TEST(OpenSqliteStoreTest, FileThatIsNotADatabaseIsDataLoss) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  std::ofstream(path) << "this is not an SQLite database, just some text that is long enough "
                         "to fill the 100-byte header SQLite looks for........................";
  const Status status = Open(path).status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("file is not a database"));
}

TEST(OpenSqliteStoreTest, FileDatabaseIsInWalMode) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  ASSERT_TRUE(Open(path).ok());
  Connection db = RawConnection(path);
  EXPECT_EQ(QueryText(db, "PRAGMA journal_mode"), "wal");  // persistent in the file
}

TEST(OpenSqliteStoreTest, ForeignKeysAreEnforced) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  Result<std::unique_ptr<Store>> store = Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  // A session for a user that does not exist; the explicit lookup reports it first, so
  // check the schema itself through a connection configured as the store's is.
  Connection db = RawConnection(path);
  ASSERT_TRUE(db.ExecuteScript("PRAGMA foreign_keys = ON").ok());
  const Status status = db.Execute(
      "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at_ms, expires_at_ms) "
      "VALUES ('h', 42, 'c', 1, 2)");
  EXPECT_EQ(status.code(), StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("FOREIGN KEY constraint failed"));
}

TEST(MigrationsTest, AreNumberedFromOneWithoutGaps) {
  int expected = 1;
  for (const sqlite_internal::Migration& migration : Migrations()) {
    EXPECT_EQ(migration.version, expected++);
    EXPECT_NE(migration.sql, nullptr);
  }
  EXPECT_EQ(LatestSchemaVersion(), expected - 1);
}

TEST(MigrationsTest, NewDatabaseRecordsEveryMigration) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  ASSERT_TRUE(Open(path).ok());
  Connection db = RawConnection(path);
  const std::vector<std::string> rows = MigrationRows(db);
  ASSERT_EQ(rows.size(), Migrations().size());
  EXPECT_EQ(rows.front().substr(0, 2), "1@");
  EXPECT_EQ(QueryText(db, "SELECT max(version) FROM schema_migrations"),
            std::to_string(LatestSchemaVersion()));
  // SQLite's clock stamps the rows: sometime after this code was written.
  EXPECT_GT(std::stoll(rows.front().substr(2)), kNow);
}

TEST(MigrationsTest, ReopeningKeepsDataAndDoesNotReapply) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  {
    Result<std::unique_ptr<Store>> store = Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->CreateOrganization("acme", "Acme", kNow).ok());
  }
  std::vector<std::string> rows_before;
  {
    Connection db = RawConnection(path);
    rows_before = MigrationRows(db);
  }
  Result<std::unique_ptr<Store>> reopened = Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  const Result<Organization> organization = (*reopened)->GetOrganizationBySlug("acme");
  ASSERT_TRUE(organization.ok()) << organization.status();
  EXPECT_EQ(organization->name, "Acme");
  Connection db = RawConnection(path);
  EXPECT_EQ(MigrationRows(db), rows_before);  // same versions, same applied_at_ms
}

TEST(MigrationsTest, DatabaseFromANewerServerIsRefusedAndLeftAlone) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  ASSERT_TRUE(Open(path).ok());
  const std::string newer = std::to_string(LatestSchemaVersion() + 1);
  {
    Connection db = RawConnection(path);
    ASSERT_TRUE(db.Execute("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (" +
                           newer + ", 1)")
                    .ok());
  }
  const Status status = Open(path).status();
  EXPECT_EQ(status, FailedPreconditionError(
                        "SQLite store \"" + path + "\": database schema version " + newer +
                        " is newer than "
                        "this expanse-server supports (" +
                        std::to_string(LatestSchemaVersion()) + "); upgrade expanse-server"))
      << "(paths over 80 characters are cut in the message; TMPDIR is long?)";
  Connection db = RawConnection(path);
  EXPECT_EQ(QueryText(db, "SELECT max(version) FROM schema_migrations"), newer);
}

TEST(MigrationsTest, ConcurrentFirstOpensMigrateOnce) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  constexpr int kOpeners = 6;
  std::vector<Status> statuses(kOpeners);
  std::vector<std::thread> threads;
  for (int i = 0; i < kOpeners; ++i) {
    threads.emplace_back([&, i] { statuses[i] = Open(path).status(); });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (const Status& status : statuses) {
    EXPECT_TRUE(status.ok()) << status;
  }
  Connection db = RawConnection(path);
  EXPECT_EQ(MigrationRows(db).size(), Migrations().size());
}

TEST(StoredDataTest, NameOutsideTheEnumsIsDataLoss) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  Result<std::unique_ptr<Store>> store = Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  const Result<Organization> organization = (*store)->CreateOrganization("acme", "Acme", kNow);
  const Result<User> user = (*store)->CreateUser("a@example.com", "A", "h", kNow);
  ASSERT_TRUE(organization.ok() && user.ok());
  ASSERT_TRUE((*store)->PutMembership({organization->id, user->id, Role::kOwner, false, ""}).ok());
  {
    // The CHECK constraint keeps such names out; a hand edit that bypasses it is what is
    // left to guard against.
    Connection db = RawConnection(path);
    ASSERT_TRUE(db.ExecuteScript("PRAGMA ignore_check_constraints = ON; "
                                 "UPDATE memberships SET role = 'root'")
                    .ok());
  }
  EXPECT_EQ((*store)->GetMembership(organization->id, user->id).status(),
            DataLossError("stored membership role is invalid: unknown role \"root\"; expected "
                          "one of owner, admin, member, viewer"));
}

TEST(SqliteStoreLockingTest, WriterBlockedPastTheBusyTimeoutGetsUnavailable) {
  const TempDir dir;
  const std::string path = dir.path() + "/store.db";
  Result<std::unique_ptr<Store>> store = Open(path, /*busy_timeout_ms=*/0);
  ASSERT_TRUE(store.ok()) << store.status();
  Connection other = RawConnection(path);
  ASSERT_TRUE(other.ExecuteScript("BEGIN IMMEDIATE").ok());

  const Status status = (*store)->CreateOrganization("acme", "Acme", kNow).status();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("database is locked"));
  EXPECT_THAT(status.message(), HasSubstr("retry later"));
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_EQ((*store)->GetOrganizationBySlug("acme").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(other.ExecuteScript("ROLLBACK").ok());
  EXPECT_TRUE((*store)->CreateOrganization("acme", "Acme", kNow).ok());
}

TEST(SqliteStoreThreadsTest, ManyThreadsShareOneStore) {
  const TempDir dir;
  Result<std::unique_ptr<Store>> opened = Open(dir.path() + "/store.db");
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string slug = "org-" + std::to_string(t) + "-" + std::to_string(i);
        Result<Organization> created = store.CreateOrganization(slug, slug, kNow);
        EXPECT_TRUE(created.ok()) << created.status();
        if (created.ok()) {
          ids[t].push_back(created->id);
          EXPECT_EQ(store.GetOrganizationBySlug(slug)->id, created->id);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  std::set<int64_t> distinct;
  for (const std::vector<int64_t>& of_thread : ids) {
    distinct.insert(of_thread.begin(), of_thread.end());
  }
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace sqlite_store_test
}  // namespace expanse::store
