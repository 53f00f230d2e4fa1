// The schema's migrations on a real PostgreSQL server (pg_test_server.h), from databases an
// older or newer expanse-server left: brought up to date keeping their rows, or refused
// untouched. The same cases on SQLite are in sqlite_store_test.cc and sqlite_store_jobs_test.cc.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "store/job_store.h"
#include "store/migrations.h"
#include "store/pg_connection.h"
#include "store/pg_store.h"
#include "store/pg_test_server.h"
#include "store/store.h"

namespace expanse::store {
namespace pg_migrations_test {
namespace {

using pg_internal::PgConnection;

constexpr int64_t kWindowMs = 1'700'000'000'000;

// A database as the server of schema version `version` left it, with `rows` (SQL) in it.
std::string DatabaseAtVersion(int version, const std::string& rows) {
  const std::string conninfo = testing::PgTestServer::Shared().NewDatabase();
  Result<PgConnection> db = PgConnection::Open(conninfo);
  EXPECT_TRUE(db.ok()) << db.status();
  std::string script =
      "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied_at_ms BIGINT NOT "
      "NULL);";
  for (const sqlite_internal::Migration& m : sqlite_internal::Migrations()) {
    if (m.version > version)
      break;
    script += m.postgres_sql;
    script += "INSERT INTO schema_migrations VALUES (" + std::to_string(m.version) + ", 1);";
  }
  const Status made = db->ExecuteScript(script + rows);
  EXPECT_TRUE(made.ok()) << made;
  return conninfo;
}

constexpr char kCompute[] =
    "INSERT INTO organizations (slug, name, created_at_ms) VALUES ('acme', 'Acme', 5);"
    "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, created_by_user, "
    "pinned_daemon_version, control_plane_url, data_plane_url) "
    "VALUES ('cmp_old', 1, 'old', 'slurm', 'active', 5, 0, '0.1.0', 'c', 'd');";

StackSample Stack(const std::string& folded, int64_t count) {
  StackSample s;
  s.compute_id = "cmp_old";
  s.job_id = "7";
  s.host = "gpu01";
  s.window_start_ms = kWindowMs;
  s.window_end_ms = kWindowMs + 60'000;
  s.folded = folded;
  s.thread_state = "gil";
  s.count = count;
  return s;
}

// Version 12 keys job_stacks by the stack's digest: a window stored under version 11's key is
// still the one a redelivery replaces, and a long stack of distinct frames now fits.
TEST(PgMigrationsTest, AVersion11DatabaseKeepsItsStacksUnderTheNewKey) {
  const std::string conninfo = DatabaseAtVersion(
      11, std::string(kCompute) +
              "INSERT INTO job_stacks (compute_id, job_id, host, window_start_ms, window_end_ms, "
              "folded, thread_state, count, gpu_idle) VALUES ('cmp_old', '7', 'gpu01', " +
              std::to_string(kWindowMs) + ", " + std::to_string(kWindowMs + 60'000) +
              ", 'a.py:main:1', 'gil', 5, 0);"
              // Heartbeat history from before it was bounded: a year old, a day old, the newest.
              "INSERT INTO credentials (compute_id, secret_hash, created_at_ms, hostname, "
              "daemon_version, slurm_version, role) VALUES ('cmp_old', 'h', 1, 'c', 'v', 's', "
              "'controller');"
              "INSERT INTO heartbeats (compute_id, credential_id, received_at_ms, controller_host, "
              "daemon_version, body_json) VALUES "
              "('cmp_old', 1, " +
              std::to_string(kWindowMs - 365LL * 86'400'000) +
              ", 'c', 'v', '{}'),"
              "('cmp_old', 1, " +
              std::to_string(kWindowMs - 86'400'000) +
              ", 'c', 'v', '{}'),"
              "('cmp_old', 1, " +
              std::to_string(kWindowMs) + ", 'c', 'v', '{}');");
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(conninfo);
  ASSERT_TRUE(store.ok()) << store.status();
  JobStore& jobs = (*store)->Jobs();
  Result<std::vector<StackTotal>> before = jobs.JobStacks("cmp_old", "7", 0, 0, 10);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].count, 5);

  std::string deep;
  for (int frame = 0; deep.size() < 12'000; ++frame)
    deep += "mod" + std::to_string(frame * 7919) + ".py:fn" + std::to_string(frame * 104729) + ":" +
            std::to_string(frame) + ";";
  deep.pop_back();
  const Status put = jobs.PutStacks({Stack("a.py:main:1", 7), Stack(deep, 2)});
  ASSERT_TRUE(put.ok()) << put;
  Result<std::vector<StackTotal>> after = jobs.JobStacks("cmp_old", "7", 0, 0, 10);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 2u) << "the old window was replaced, not added beside";
  for (const StackTotal& total : *after)
    EXPECT_EQ(total.count, total.folded == deep ? 2 : 7) << total.folded.substr(0, 40);

  // The backlog of heartbeats more than a day older than the newest went with the migration.
  Result<PgConnection> db = PgConnection::Open(conninfo);
  ASSERT_TRUE(db.ok()) << db.status();
  Result<pg_internal::PgStatement> kept = db->Query(
      "SELECT string_agg(received_at_ms::text, ',' ORDER BY received_at_ms) FROM heartbeats");
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(*kept->Step());
  EXPECT_EQ(kept->ColumnText(0),
            std::to_string(kWindowMs - 86'400'000) + "," + std::to_string(kWindowMs));
}

// A database a newer expanse-server migrated is refused, and left as it was.
TEST(PgMigrationsTest, ANewerSchemaIsRefusedUntouched) {
  const int newer = sqlite_internal::LatestSchemaVersion() + 1;
  const std::string conninfo = DatabaseAtVersion(
      sqlite_internal::LatestSchemaVersion(),
      std::string(kCompute) + "INSERT INTO schema_migrations VALUES (" + std::to_string(newer) +
          ", 1); CREATE TABLE from_the_future (x BIGINT);");
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(conninfo);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status();
  EXPECT_NE(store.status().message().find("is newer than this expanse-server supports"),
            std::string::npos)
      << store.status();
  Result<PgConnection> db = PgConnection::Open(conninfo);
  ASSERT_TRUE(db.ok()) << db.status();
  Result<pg_internal::PgStatement> versions =
      db->Query("SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations");
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_TRUE(*versions->Step());
  EXPECT_EQ(versions->ColumnText(0).substr(versions->ColumnText(0).rfind(',') + 1),
            std::to_string(newer));
  EXPECT_TRUE(db->ExecuteScript("SELECT count(*) FROM from_the_future").ok());
}

}  // namespace
}  // namespace pg_migrations_test
}  // namespace expanse::store
