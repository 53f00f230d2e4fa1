// The PostgreSQL store among replicas: what one replica's stuck or failing transaction does to
// another's (docs/scaling.md).
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace {

using store_testing::Backing;
using store_testing::BackingName;
using store_testing::kNow;

class PgStoreTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, PgStoreTest, ::testing::Values(Backing::kPostgres), BackingName);

// Another replica holds the writers' lock past this one's lock_timeout (as a replica whose
// host vanished mid-transaction does): the write fails retryable, and the store's connection
// serves the next write once the lock is free. (PostgreSQL keeps a session whose lock wait
// failed inside a failed transaction that refuses everything until rolled back.)
TEST_P(PgStoreTest, AWriteThatWaitedTooLongForTheLockFailsAloneAndRetryable) {
  Result<std::unique_ptr<Store>> replica =
      OpenPostgresStore(postgres_conninfo() + " options='-c lock_timeout=200'");
  ASSERT_TRUE(replica.ok()) << replica.status();
  auto opened = pg_internal::PgConnection::Open(postgres_conninfo());
  ASSERT_TRUE(opened.ok()) << opened.status();
  pg_internal::PgConnection other = std::move(*opened);
  ASSERT_TRUE(
      other.ExecuteScript(sqlite_internal::BeginSql(sqlite_internal::Engine::kPostgres, true))
          .ok());
  const Result<Organization> refused = (*replica)->CreateOrganization("waits", "Waits", kNow);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
  EXPECT_NE(refused.status().message().find("write lock too long; retry"), std::string::npos)
      << refused.status();
  const Result<Organization> read = (*replica)->GetOrganizationBySlug("waits");
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound) << read.status();  // reads go on
  ASSERT_TRUE(other.ExecuteScript("COMMIT").ok());
  const Result<Organization> created = (*replica)->CreateOrganization("later", "Later", kNow);
  EXPECT_TRUE(created.ok()) << created.status();
}

}  // namespace
}  // namespace expanse::store
