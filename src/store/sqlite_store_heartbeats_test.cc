// SqliteStore: heartbeats, staleness and deprovisioning.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/pg_connection.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_heartbeats_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;

class HeartbeatsTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, HeartbeatsTest, kBackings, BackingName);

ComputeState StateOf(Store& store, const std::string& id) {
  const Result<Compute> compute = store.GetCompute(id);
  EXPECT_TRUE(compute.ok()) << compute.status();
  return compute.ok() ? compute->state : ComputeState::kRegistered;
}

// The history keeps a day before the newest heartbeat of each compute; its rows are counted
// with a connection of the test's own, which an in-memory database cannot have.
class HeartbeatHistoryTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, HeartbeatHistoryTest,
                         ::testing::Values(store_testing::Backing::kFile,
                                           store_testing::Backing::kPostgres),
                         BackingName);

TEST_P(HeartbeatHistoryTest, HistoryOlderThanADayBeforeTheNewestIsDeleted) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  const Credential a = Enroll("cmp_a", "s");
  const Credential b = Enroll("cmp_b", "t");
  constexpr int64_t kDay = Store::kHeartbeatHistoryMs;
  for (const int64_t at : {kNow, kNow + kHour, kNow + kDay - 1})
    ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(a, at)).ok());
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(b, kNow)).ok());
  auto rows = [&](const std::string& compute) -> int64_t {
    const std::string sql = "SELECT count(*) FROM heartbeats WHERE compute_id = '" + compute + "'";
    if (GetParam() == store_testing::Backing::kPostgres) {
      auto db = pg_internal::PgConnection::Open(postgres_conninfo());
      auto count = db.ok() ? db->Query(sql) : decltype(db->Query(sql))(db.status());
      return count.ok() && *count->Step() ? count->ColumnInt(0) : -1;
    }
    auto db = sqlite_internal::SqliteConnection::Open(db_path(), 5000);
    auto count = db.ok() ? db->Query(sql) : decltype(db->Query(sql))(db.status());
    return count.ok() && *count->Step() ? count->ColumnInt(0) : -1;
  };
  EXPECT_EQ(rows("cmp_a"), 3) << "all within a day of the newest";
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(a, kNow + kDay + kHour)).ok());
  EXPECT_EQ(rows("cmp_a"), 3) << "the first, more than a day before the newest, is gone";
  // A late heartbeat, older than the newest, deletes nothing newer than a day before it.
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(a, kNow + 2 * kHour)).ok());
  EXPECT_EQ(rows("cmp_a"), 4);
  EXPECT_EQ(store().LatestHeartbeat("cmp_a")->received_at_ms, kNow + kDay + kHour);
  EXPECT_EQ(rows("cmp_b"), 1) << "another compute's history is its own";
}

// A daemon sending heartbeats as fast as it may cannot fill the disk: the rows before the
// newest stay 10 s apart, and a large body is kept only while it is the newest.
TEST_P(HeartbeatHistoryTest, HistoryKeepsOneHeartbeatPerTenSecondsAndLargeBodiesOnlyInTheNewest) {
  MakeCompute("cmp_a");
  const Credential a = Enroll("cmp_a", "s");
  auto bodies = [&]() -> std::string {
    const std::string sql =
        "SELECT string_agg(CASE WHEN length(body_json) > 100 THEN 'large' ELSE body_json END, "
        "',' ORDER BY received_at_ms) FROM heartbeats WHERE compute_id = 'cmp_a'";
    if (GetParam() == store_testing::Backing::kPostgres) {
      auto db = pg_internal::PgConnection::Open(postgres_conninfo());
      auto rows = db.ok() ? db->Query(sql) : decltype(db->Query(sql))(db.status());
      return rows.ok() && *rows->Step() ? rows->ColumnText(0) : rows.status().ToString();
    }
    auto db = sqlite_internal::SqliteConnection::Open(db_path(), 5000);
    const std::string sqlite_sql =
        "SELECT group_concat(b, ',') FROM (SELECT CASE WHEN length(body_json) > 100 THEN "
        "'large' ELSE body_json END AS b FROM heartbeats WHERE compute_id = 'cmp_a' ORDER BY "
        "received_at_ms)";
    auto rows = db.ok() ? db->Query(sqlite_sql) : decltype(db->Query(sqlite_sql))(db.status());
    return rows.ok() && *rows->Step() ? rows->ColumnText(0) : rows.status().ToString();
  };
  const auto record = [&](int64_t at, std::string body) {
    Heartbeat heartbeat = HeartbeatOf(a, at);
    heartbeat.body_json = std::move(body);
    const Status recorded = store().RecordHeartbeat(heartbeat);
    ASSERT_TRUE(recorded.ok()) << recorded;
  };
  record(kNow, R"({"n":1})");
  record(kNow + 4'000, R"({"n":2})");
  record(kNow + 8'000, R"({"n":3})");   // replaces n2, 4 s after n1
  record(kNow + 12'000, R"({"n":4})");  // and n3, 8 s after n1
  EXPECT_EQ(bodies(), R"({"n":1},{"n":4})");
  record(kNow + 16'000, R"({"n":5})");  // n4 is 12 s after n1: kept
  EXPECT_EQ(bodies(), R"({"n":1},{"n":4},{"n":5})");
  const std::string large =
      R"({"pad":")" + std::string(Store::kMaxHistoryHeartbeatBytes, 'x') + R"("})";
  record(kNow + 30'000, large);  // n5 is 4 s after n4: replaced
  EXPECT_EQ(bodies(), R"({"n":1},{"n":4},large)");
  EXPECT_EQ(store().LatestHeartbeat("cmp_a")->body_json, large);  // the newest keeps it
  record(kNow + 60'000, R"({"n":7})");
  EXPECT_EQ(bodies(),
            R"({"n":1},{"n":4},{"omitted_bytes":)" + std::to_string(large.size()) + R"(},{"n":7})");
}

TEST_P(HeartbeatsTest, FirstHeartbeatActivatesTheCompute) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s");
  Heartbeat heartbeat = HeartbeatOf(credential, kNow + 100);
  heartbeat.controller_host = "ctl01";
  heartbeat.daemon_version = "0.1.1";
  ASSERT_TRUE(store().RecordHeartbeat(heartbeat).ok());

  const Result<Compute> compute = store().GetCompute("cmp_a");
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ(compute->state, ComputeState::kActive);
  EXPECT_EQ(compute->last_heartbeat_ms, kNow + 100);
  EXPECT_EQ(compute->controller_host, "ctl01");
  EXPECT_EQ(compute->daemon_version, "0.1.1");
  EXPECT_EQ(store().GetCredential(credential.id)->first_heartbeat_ms, kNow + 100);
}

TEST_P(HeartbeatsTest, FirstHeartbeatTimeIsSetOnce) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s");
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(credential, kNow + 100)).ok());
  Heartbeat later = HeartbeatOf(credential, kNow + 200);
  later.controller_host = "ctl02";
  ASSERT_TRUE(store().RecordHeartbeat(later).ok());

  EXPECT_EQ(store().GetCredential(credential.id)->first_heartbeat_ms, kNow + 100);
  EXPECT_EQ(store().GetCompute("cmp_a")->last_heartbeat_ms, kNow + 200);
  EXPECT_EQ(store().GetCompute("cmp_a")->controller_host, "ctl02");
}

TEST_P(HeartbeatsTest, LatestHeartbeatIsTheNewestAndKeepsTheBody) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s");
  Heartbeat first = HeartbeatOf(credential, kNow + 100);
  first.body_json = R"({"seq":1})";
  Heartbeat second = HeartbeatOf(credential, kNow + 200);
  second.body_json = R"({"seq":2,"note":")" + kOddText + "\"}";
  second.controller_host = kOddText;
  second.daemon_version = kOddText;
  ASSERT_TRUE(store().RecordHeartbeat(first).ok());
  ASSERT_TRUE(store().RecordHeartbeat(second).ok());

  const Result<Heartbeat> latest = store().LatestHeartbeat("cmp_a");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->compute_id, "cmp_a");
  EXPECT_EQ(latest->credential_id, credential.id);
  EXPECT_EQ(latest->received_at_ms, kNow + 200);
  EXPECT_EQ(latest->controller_host, kOddText);
  EXPECT_EQ(latest->daemon_version, kOddText);
  EXPECT_EQ(latest->body_json, second.body_json);
}

TEST_P(HeartbeatsTest, LateOlderHeartbeatDoesNotRollBackTheCompute) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s");
  Heartbeat newer = HeartbeatOf(credential, kNow + 200);
  newer.controller_host = "new-host";
  Heartbeat older = HeartbeatOf(credential, kNow + 100);
  older.controller_host = "old-host";
  ASSERT_TRUE(store().RecordHeartbeat(newer).ok());
  ASSERT_TRUE(store().RecordHeartbeat(older).ok());

  EXPECT_EQ(store().GetCompute("cmp_a")->last_heartbeat_ms, kNow + 200);
  EXPECT_EQ(store().GetCompute("cmp_a")->controller_host, "new-host");
  EXPECT_EQ(store().LatestHeartbeat("cmp_a")->controller_host, "new-host");
}

TEST_P(HeartbeatsTest, LatestHeartbeatErrors) {
  MakeCompute("cmp_a");
  EXPECT_EQ(store().LatestHeartbeat("cmp_a").status(),
            NotFoundError("compute cmp_a has sent no heartbeat"));
  EXPECT_EQ(store().LatestHeartbeat("cmp_b").status(), NotFoundError("compute cmp_b not found"));
}

TEST_P(HeartbeatsTest, HeartbeatErrors) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  const Credential a = Enroll("cmp_a", "sa");
  const Credential b = Enroll("cmp_b", "sb");

  Heartbeat unknown_compute = HeartbeatOf(a, kNow);
  unknown_compute.compute_id = "cmp_zz";
  EXPECT_EQ(store().RecordHeartbeat(unknown_compute), NotFoundError("compute cmp_zz not found"));

  Heartbeat unknown_credential = HeartbeatOf(a, kNow);
  unknown_credential.credential_id = 999;
  EXPECT_EQ(store().RecordHeartbeat(unknown_credential), NotFoundError("credential 999 not found"));

  Heartbeat crossed = HeartbeatOf(b, kNow);
  crossed.compute_id = "cmp_a";
  EXPECT_EQ(store().RecordHeartbeat(crossed),
            PermissionDeniedError("credential " + std::to_string(b.id) +
                                  " does not belong to compute cmp_a"));

  IssueToken("cmp_a", "again", kNow + 1);
  ASSERT_TRUE(store().ExchangeInstallToken("again", CredentialWithSecret("sa2"), kNow + 2).ok());
  EXPECT_EQ(
      store().RecordHeartbeat(HeartbeatOf(a, kNow + 3)),
      UnauthenticatedError("credential " + std::to_string(a.id) + " has been revoked (replaced)"));
  // None of the refused heartbeats was stored or activated anything.
  EXPECT_EQ(StateOf(store(), "cmp_a"), ComputeState::kRegistered);
  EXPECT_EQ(store().LatestHeartbeat("cmp_a").status().code(), StatusCode::kNotFound);
}

TEST_P(HeartbeatsTest, MarkStaleComputesAffectsOnlyActiveComputesPastTheCutoff) {
  const Organization organization = MakeOrganization();
  MakeCompute("cmp_old", organization.id);
  MakeCompute("cmp_fresh", organization.id);
  MakeCompute("cmp_new", organization.id);  // registered, never heard from
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(Enroll("cmp_old", "s1"), kNow)).ok());
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(Enroll("cmp_fresh", "s2"), kNow + kHour)).ok());

  const Result<int> marked = store().MarkStaleComputes(kNow + 1);
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_EQ(*marked, 1);
  EXPECT_EQ(StateOf(store(), "cmp_old"), ComputeState::kStale);
  EXPECT_EQ(StateOf(store(), "cmp_fresh"), ComputeState::kActive);
  EXPECT_EQ(StateOf(store(), "cmp_new"), ComputeState::kRegistered);
  // A heartbeat exactly at the cutoff is not older than it.
  EXPECT_EQ(*store().MarkStaleComputes(kNow + kHour), 0);
  // Already stale computes are not counted again.
  EXPECT_EQ(*store().MarkStaleComputes(kNow + 1), 0);
}

TEST_P(HeartbeatsTest, HeartbeatRevivesAStaleCompute) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s");
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(credential, kNow)).ok());
  ASSERT_EQ(*store().MarkStaleComputes(kNow + kHour), 1);
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(credential, kNow + 2 * kHour)).ok());
  EXPECT_EQ(StateOf(store(), "cmp_a"), ComputeState::kActive);
}

TEST_P(HeartbeatsTest, DeprovisionRevokesCredentialsAndInvalidatesTokens) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  const Credential live = Enroll("cmp_a", "s1");
  const Credential other = Enroll("cmp_b", "sb");
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(live, kNow + 1)).ok());
  IssueToken("cmp_a", "pending", kNow + 2);

  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow + 10).ok());
  const Result<Compute> compute = store().GetCompute("cmp_a");
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ(compute->state, ComputeState::kDeprovisioned);
  EXPECT_EQ(compute->deprovisioned_at_ms, kNow + 10);
  EXPECT_EQ(store().GetCredential(live.id)->revoked_at_ms, kNow + 10);
  EXPECT_EQ(store().GetCredential(live.id)->revoke_reason, "deprovisioned");
  EXPECT_EQ(store().GetInstallTokenByHash("pending")->invalidated_at_ms, kNow + 10);
  // The used enrolment token keeps its history and is not also marked invalidated.
  EXPECT_EQ(store().GetInstallTokenByHash("token-for-s1")->invalidated_at_ms, 0);
  EXPECT_EQ(store().GetCredential(other.id)->revoked_at_ms, 0);
  EXPECT_EQ(StateOf(store(), "cmp_b"), ComputeState::kRegistered);
  // History stays.
  EXPECT_EQ(store().LatestHeartbeat("cmp_a")->received_at_ms, kNow + 1);
}

TEST_P(HeartbeatsTest, DeprovisionIsIdempotent) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s1");
  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow + 10).ok());
  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow + 20).ok());
  EXPECT_EQ(store().GetCompute("cmp_a")->deprovisioned_at_ms, kNow + 10);
  EXPECT_EQ(store().GetCredential(credential.id)->revoked_at_ms, kNow + 10);
  EXPECT_EQ(store().DeprovisionCompute("cmp_zz", kNow), NotFoundError("compute cmp_zz not found"));
}

TEST_P(HeartbeatsTest, DeprovisionedComputeTakesNoHeartbeatAndStaysDeprovisioned) {
  MakeCompute("cmp_a");
  const Credential credential = Enroll("cmp_a", "s1");
  ASSERT_TRUE(store().RecordHeartbeat(HeartbeatOf(credential, kNow)).ok());
  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow + 10).ok());
  EXPECT_EQ(store().RecordHeartbeat(HeartbeatOf(credential, kNow + 20)),
            FailedPreconditionError("compute cmp_a is deprovisioned"));
  EXPECT_EQ(*store().MarkStaleComputes(kNow + kHour), 0);
  EXPECT_EQ(StateOf(store(), "cmp_a"), ComputeState::kDeprovisioned);
}

}  // namespace
}  // namespace sqlite_store_heartbeats_test
}  // namespace expanse::store
