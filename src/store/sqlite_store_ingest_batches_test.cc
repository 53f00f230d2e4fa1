// The store's record of ingest batches sent to a remote telemetry store: claimed once, marked
// stored, a lapsed claim taken over, old records forgotten; on every backing.
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_ingest_batches_test {
namespace {

using store_testing::Backing;
using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using Claim = JobStore::BatchClaim;

constexpr int64_t kLease = 60'000;

class IngestBatchesTest : public store_testing::SqliteStoreTest {
 protected:
  JobStore& jobs() { return store().Jobs(); }

  Claim MustClaim(std::string_view batch_id, int64_t now_ms) {
    const Result<Claim> claim = jobs().ClaimIngestBatch("cmp_a", batch_id, now_ms, kLease);
    EXPECT_TRUE(claim.ok()) << claim.status();
    return claim.ok() ? *claim : Claim::kInFlight;
  }
};

TEST_P(IngestBatchesTest, FirstClaimWinsAndAStoredBatchIsARepeat) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  // Another replica, while the first writes the samples.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 1000), Claim::kInFlight);
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/1", kNow + 2000).ok());
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 3000), Claim::kStored);
  // Long after too: a stored batch never becomes claimable again until forgotten.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 10 * kLease), Claim::kStored);
  // Other batches are their own.
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + 3000), Claim::kClaimed);
}

TEST_P(IngestBatchesTest, ALapsedClaimIsTakenOverOnce) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease - 1), Claim::kInFlight);
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease), Claim::kClaimed);
  // The takeover renewed the claim: a third replica waits for it.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease + 1), Claim::kInFlight);
}

TEST_P(IngestBatchesTest, AReleasedClaimIsFreeAtOnceButAStoredBatchStaysStored) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  ASSERT_TRUE(jobs().ReleaseIngestBatch("cmp_a/main/1", kNow).ok());
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 1), Claim::kClaimed);
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/1", kNow + 2).ok());
  ASSERT_TRUE(jobs().ReleaseIngestBatch("cmp_a/main/1", kNow + 1).ok());
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 3), Claim::kStored);
}

TEST_P(IngestBatchesTest, MarkingAnUnclaimedBatchIsNotFound) {
  const Status status = jobs().MarkIngestBatchStored("cmp_a/main/9", kNow);
  EXPECT_EQ(status.code(), StatusCode::kNotFound) << status;
}

TEST_P(IngestBatchesTest, SeveralBatchesAreClaimedMarkedAndReleasedInOneCall) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/1", kNow).ok());
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow), Claim::kClaimed);
  // Stored, held by a live claim, new, new from another compute: answers in order.
  const Result<std::vector<Claim>> claims = jobs().ClaimIngestBatches({{"cmp_a", "cmp_a/main/1"},
                                                                       {"cmp_a", "cmp_a/main/2"},
                                                                       {"cmp_a", "cmp_a/main/3"},
                                                                       {"cmp_b", "cmp_b/main/1"}},
                                                                      kNow + 1000, kLease);
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(*claims, (std::vector<Claim>{Claim::kStored, Claim::kInFlight, Claim::kClaimed,
                                         Claim::kClaimed}));
  // One of three never claimed: the others are marked all the same, and the error says so.
  const Status marked =
      jobs().MarkIngestBatchesStored({"cmp_a/main/3", "cmp_a/main/9", "cmp_b/main/1"}, kNow + 2000);
  EXPECT_EQ(marked.code(), StatusCode::kNotFound) << marked;
  EXPECT_NE(marked.message().find("1 were never claimed"), std::string::npos) << marked;
  EXPECT_EQ(MustClaim("cmp_a/main/3", kNow + 3000), Claim::kStored);
  EXPECT_EQ(MustClaim("cmp_b/main/1", kNow + 3000), Claim::kStored);
  // Releasing several frees the claimed ones and leaves the stored one stored.
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + kLease), Claim::kClaimed);  // taken over
  EXPECT_EQ(MustClaim("cmp_a/main/4", kNow + kLease), Claim::kClaimed);
  ASSERT_TRUE(
      jobs()
          .ReleaseIngestBatches({"cmp_a/main/2", "cmp_a/main/3", "cmp_a/main/4"}, kNow + kLease)
          .ok());
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + kLease + 1), Claim::kClaimed);
  EXPECT_EQ(MustClaim("cmp_a/main/3", kNow + kLease + 1), Claim::kStored);
  EXPECT_EQ(MustClaim("cmp_a/main/4", kNow + kLease + 1), Claim::kClaimed);
}

// A replica whose write outlasted its lease releases only its own claim: the one another
// replica took over meanwhile stays, and that replica's mark finds it.
TEST_P(IngestBatchesTest, AReleaseLeavesAClaimAnotherReplicaTookOver) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);                // replica A
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease + 5), Claim::kClaimed);   // B takes over
  ASSERT_TRUE(jobs().ReleaseIngestBatch("cmp_a/main/1", kNow).ok());          // A's write failed
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease + 6), Claim::kInFlight);  // still B's
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/1", kNow + kLease + 7).ok());  // B wrote
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease + 8), Claim::kStored);
}

TEST_P(IngestBatchesTest, WrittenBatchesAreMarkedInTheNextClaimsStatement) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow), Claim::kClaimed);
  // The group of 1 and 2 was written; the next group's claim marks them.
  const Result<std::vector<Claim>> claims = jobs().MarkAndClaimIngestBatches(
      {"cmp_a/main/1", "cmp_a/main/2"}, {{"cmp_a", "cmp_a/main/3"}, {"cmp_b", "cmp_b/main/1"}},
      kNow + 1000, kLease);
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(*claims, (std::vector<Claim>{Claim::kClaimed, Claim::kClaimed}));
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 2000), Claim::kStored);
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + 2000), Claim::kStored);
  EXPECT_EQ(MustClaim("cmp_a/main/3", kNow + 2000), Claim::kInFlight);
  // Long past the lease too: marked, not merely claimed again.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 10 * kLease), Claim::kStored);
  // A claim still answers each of its own, stored or in flight, beside the marks.
  const Result<std::vector<Claim>> again = jobs().MarkAndClaimIngestBatches(
      {"cmp_a/main/3"}, {{"cmp_a", "cmp_a/main/1"}, {"cmp_b", "cmp_b/main/1"}}, kNow + 3000,
      kLease);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, (std::vector<Claim>{Claim::kStored, Claim::kInFlight}));
  EXPECT_EQ(MustClaim("cmp_a/main/3", kNow + 4000), Claim::kStored);
}

TEST_P(IngestBatchesTest, MarksNameAnyIdExactly) {
  // Quotes, a backslash, a comma and braces: PostgreSQL takes the marks as one array literal.
  const std::vector<std::string_view> odd = {"cmp_a/a\"b/1", "cmp_a/c\\d/2", "cmp_a/e,f/3",
                                             "cmp_a/{g}/4"};
  for (const std::string_view id : odd)
    EXPECT_EQ(MustClaim(id, kNow), Claim::kClaimed) << id;
  EXPECT_EQ(MustClaim("cmp_a/plain/1", kNow), Claim::kClaimed);
  ASSERT_TRUE(jobs().MarkIngestBatchesStored({odd[0], odd[1]}, kNow + 1000).ok());
  const Result<std::vector<Claim>> claims = jobs().MarkAndClaimIngestBatches(
      {odd[2], odd[3]}, {{"cmp_a", "cmp_a/plain/2"}}, kNow + 1000, kLease);
  ASSERT_TRUE(claims.ok()) << claims.status();
  for (const std::string_view id : odd)
    EXPECT_EQ(MustClaim(id, kNow + 10 * kLease), Claim::kStored) << id;
  // Only those: the one not named is still a lapsed claim, taken over.
  EXPECT_EQ(MustClaim("cmp_a/plain/1", kNow + 10 * kLease), Claim::kClaimed);
}

TEST_P(IngestBatchesTest, AMarkAndAClaimMayNotNameTheSameBatch) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  const Result<std::vector<Claim>> claims = jobs().MarkAndClaimIngestBatches(
      {"cmp_a/main/1"}, {{"cmp_a", "cmp_a/main/1"}}, kNow + 1000, kLease);
  EXPECT_EQ(claims.status().code(), StatusCode::kInvalidArgument) << claims.status();
  // Marks alone are not a claim.
  EXPECT_EQ(jobs().MarkAndClaimIngestBatches({"cmp_a/main/1"}, {}, kNow, kLease).status().code(),
            StatusCode::kInvalidArgument);
  // The refused calls changed nothing: the claim is still live and unmarked.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 2000), Claim::kInFlight);
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + kLease), Claim::kClaimed);
}

TEST_P(IngestBatchesTest, AClaimThatNamesACredentialNeedsItLiveAndTheComputes) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  Enroll("cmp_a", "secret-old");
  Enroll("cmp_a", "secret-new");  // replaces (revokes) secret-old
  Enroll("cmp_b", "secret-b");
  ASSERT_NE(store().GetCredentialByHash("secret-old")->revoked_at_ms, 0);
  // Also one stored before its credential was replaced: refused all the same (the sender must
  // stop, not be told its batch is safe).
  EXPECT_EQ(MustClaim("cmp_a/main/0", kNow), Claim::kClaimed);
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/0", kNow).ok());
  const Result<std::vector<Claim>> claims =
      jobs().ClaimIngestBatches({{"cmp_a", "cmp_a/main/1", "secret-new"},
                                 {"cmp_a", "cmp_a/main/2", "secret-old"},
                                 {"cmp_a", "cmp_a/main/3", "secret-b"},
                                 {"cmp_a", "cmp_a/main/4", "secret-unknown"},
                                 {"cmp_a", "cmp_a/main/0", "secret-old"},
                                 {"cmp_b", "cmp_b/main/1", "secret-b"},
                                 {"cmp_a", "cmp_a/main/5", ""}},
                                kNow + 1000, kLease);
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(*claims,
            (std::vector<Claim>{Claim::kClaimed, Claim::kCredentialRefused,
                                Claim::kCredentialRefused, Claim::kCredentialRefused,
                                Claim::kCredentialRefused, Claim::kClaimed, Claim::kClaimed}));
  // Nothing was claimed for the refused ones: the same ids are free to a sender with a live
  // credential.
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + 2000), Claim::kClaimed);
  EXPECT_EQ(MustClaim("cmp_a/main/4", kNow + 2000), Claim::kClaimed);
}

TEST_P(IngestBatchesTest, ACallNamesEachBatchOnceAndAtLeastOne) {
  EXPECT_EQ(
      jobs()
          .ClaimIngestBatches({{"cmp_a", "cmp_a/main/1"}, {"cmp_a", "cmp_a/main/1"}}, kNow, kLease)
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().ClaimIngestBatches({}, kNow, kLease).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().MarkIngestBatchesStored({"a/b/1", "a/b/1"}, kNow).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().ReleaseIngestBatches({}, kNow).code(), StatusCode::kInvalidArgument);
  // Nothing was claimed by the refused calls.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
}

TEST_P(IngestBatchesTest, RefusesEmptyAndOversizedIds) {
  EXPECT_EQ(jobs().ClaimIngestBatch("cmp_a", "", kNow, kLease).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().ClaimIngestBatch("cmp_a", std::string(257, 'x'), kNow, kLease).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().ClaimIngestBatch("", "cmp_a/main/1", kNow, kLease).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().ClaimIngestBatch("cmp_a", "cmp_a/main/1", kNow, 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(IngestBatchesTest, ForgetsRecordsClaimedBeforeTheCutoff) {
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow), Claim::kClaimed);
  ASSERT_TRUE(jobs().MarkIngestBatchStored("cmp_a/main/1", kNow).ok());
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + 5000), Claim::kClaimed);
  const Result<int64_t> forgotten = jobs().ForgetIngestBatches(kNow + 1);
  ASSERT_TRUE(forgotten.ok()) << forgotten.status();
  EXPECT_EQ(*forgotten, 1);
  // The forgotten one is new again; the kept one still in flight.
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 6000), Claim::kClaimed);
  EXPECT_EQ(MustClaim("cmp_a/main/2", kNow + 6000), Claim::kInFlight);
}

INSTANTIATE_TEST_SUITE_P(Backings, IngestBatchesTest, kBackings, BackingName);

// On PostgreSQL the ledger has a connection of its own: a replica's claims and marks go on
// while one of its writers waits for the database's writer lock (held here by another client,
// as another replica's long transaction would hold it), instead of queueing behind that writer
// for the store's one connection.
class LedgerConnectionTest : public IngestBatchesTest {};
INSTANTIATE_TEST_SUITE_P(Backings, LedgerConnectionTest, ::testing::Values(Backing::kPostgres),
                         BackingName);

TEST_P(LedgerConnectionTest, ClaimsAndMarksGoOnWhileAWriterWaitsForTheLock) {
  auto opened = pg_internal::PgConnection::Open(postgres_conninfo());
  ASSERT_TRUE(opened.ok()) << opened.status();
  pg_internal::PgConnection other = std::move(*opened);
  ASSERT_TRUE(
      other.ExecuteScript(sqlite_internal::BeginSql(sqlite_internal::Engine::kPostgres, true))
          .ok());
  // A write of the store's own: it takes the store's connection, then waits for the lock.
  auto writer = std::async(std::launch::async, [&] {
    return store().CreateOrganization("waits", "Waits", kNow).status();
  });
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    auto rows = other.Query(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
        "datname = current_database()");
    waiting = rows.ok() && *rows->Step() && rows->ColumnInt(0) == 1;
    if (!waiting)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(waiting) << "the store's writer never waited for the lock";
  // The ledger meanwhile: a claim, and a mark riding in the next claim. Bounded only so that a
  // ledger stuck behind the writer fails the test instead of hanging it.
  auto ledger = std::async(std::launch::async, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(
        jobs().ClaimIngestBatches({{"cmp_a", "cmp_a/main/1"}}, kNow, kLease).status());
    return jobs()
        .MarkAndClaimIngestBatches({"cmp_a/main/1"}, {{"cmp_a", "cmp_a/main/2"}}, kNow, kLease)
        .status();
  });
  const bool ledger_done = ledger.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  const bool writer_done = writer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  ASSERT_TRUE(other.ExecuteScript("COMMIT").ok());  // the writer goes on
  EXPECT_TRUE(ledger_done) << "the ledger waited for the store's writer";
  EXPECT_FALSE(writer_done) << "the writer did not wait for the lock";
  EXPECT_TRUE(ledger.get().ok());
  EXPECT_TRUE(writer.get().ok());
  EXPECT_EQ(MustClaim("cmp_a/main/1", kNow + 1), Claim::kStored);
}

// Scans and index scans of a table so far, as PostgreSQL's statistics have them.
struct Scans {
  int64_t seq = -1, idx = -1;
};
Scans ScansOf(pg_internal::PgConnection& db, const char* table) {
  auto rows = db.Query(
      "SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = ?1", table);
  if (!rows.ok() || !rows->Step().value_or(false))
    return {};
  return {rows->ColumnInt(0), rows->ColumnInt(1)};
}

// Every ledger statement finds its rows by key, however small the tables were when it was
// planned: a prepared statement's generic plan, cached while ingest_batches was nearly
// empty, used to scan the whole table at every claim that carried marks, and each claim's
// credential check scanned every credential.
TEST_P(LedgerConnectionTest, LedgerStatementsScanNoTable) {
  auto opened = pg_internal::PgConnection::Open(postgres_conninfo());
  ASSERT_TRUE(opened.ok()) << opened.status();
  pg_internal::PgConnection stats = std::move(*opened);
  // The backends of the store this test opens below (its statistics reach the shared ones
  // when they exit): all but this connection and the fixture's store's two.
  const auto others = [&] {
    auto rows = stats.Query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "pid <> pg_backend_pid()");
    return rows.ok() && rows->Step().value_or(false) ? rows->ColumnInt(0) : -1;
  };
  // The fixture's store's two; earlier tests' connections may still be on their way out.
  constexpr int64_t fixture_backends = 2;
  for (int i = 0; i < 600 && others() != fixture_backends; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(others(), fixture_backends);
  const Scans batches_before = ScansOf(stats, "ingest_batches");
  const Scans credentials_before = ScansOf(stats, "credentials");
  {
    Result<std::unique_ptr<Store>> another = OpenAnother();
    ASSERT_TRUE(another.ok()) << another.status();
    JobStore& ledger = (*another)->Jobs();
    // More rounds than PostgreSQL's five custom plans before it settles on a generic one.
    std::vector<std::string> written;
    for (int round = 0; round < 12; ++round) {
      const std::string a = "cmp_a/main/" + std::to_string(2 * round);
      const std::string b = "cmp_a/main/" + std::to_string(2 * round + 1);
      const std::vector<std::string_view> marks(written.begin(), written.end());
      auto claims = ledger.MarkAndClaimIngestBatches(
          marks, {{"cmp_a", a}, {"cmp_a", b, "secret-unknown"}}, kNow, kLease);
      ASSERT_TRUE(claims.ok()) << claims.status();
      EXPECT_EQ(*claims, (std::vector<Claim>{Claim::kClaimed, Claim::kCredentialRefused}));
      written = {a};
    }
    ASSERT_TRUE(ledger.MarkIngestBatchesStored({"cmp_a/main/22"}, kNow).ok());
    auto again = ledger.ClaimIngestBatches({{"cmp_a", "cmp_a/main/0"}, {"cmp_a", "cmp_a/new"}},
                                           kNow + 1, kLease);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, (std::vector<Claim>{Claim::kStored, Claim::kClaimed}));
    ASSERT_TRUE(ledger.ReleaseIngestBatches({"cmp_a/new"}, kNow + 1).ok());
  }
  for (int i = 0; i < 600 && others() != fixture_backends; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(others(), fixture_backends) << "the store's connections did not end";
  const Scans batches_after = ScansOf(stats, "ingest_batches");
  const Scans credentials_after = ScansOf(stats, "credentials");
  // The statistics did arrive (the index scans), and they hold no scan of either table.
  EXPECT_GT(batches_after.idx, batches_before.idx);
  EXPECT_GT(credentials_after.idx, credentials_before.idx);
  EXPECT_EQ(batches_after.seq, batches_before.seq);
  EXPECT_EQ(credentials_after.seq, credentials_before.seq);
}

}  // namespace
}  // namespace sqlite_store_ingest_batches_test
}  // namespace expanse::store
