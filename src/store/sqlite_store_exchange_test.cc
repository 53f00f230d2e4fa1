// SqliteStore: the single-use exchange of an install token for a compute credential.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_exchange_test {
namespace {

using store_testing::Backing;
using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::HasSubstr;
using ::testing::Not;

class ExchangeTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, ExchangeTest, kBackings, BackingName);

TEST_P(ExchangeTest, SuccessUsesTheTokenAndStoresTheCredential) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "install-hash");
  Credential offered = CredentialWithSecret("secret-1");
  offered.compute_id = "cmp_someone_else";  // ignored: the token decides
  offered.revoked_at_ms = 3;                // ignored: a new credential is live
  offered.first_heartbeat_ms = 4;           // ignored: no heartbeat yet
  const Result<Credential> credential =
      store().ExchangeInstallToken("install-hash", offered, kNow + 10);
  ASSERT_TRUE(credential.ok()) << credential.status();
  EXPECT_GT(credential->id, 0);
  EXPECT_EQ(credential->compute_id, "cmp_a");
  EXPECT_EQ(credential->created_at_ms, kNow + 10);
  EXPECT_EQ(credential->revoked_at_ms, 0);
  EXPECT_EQ(credential->first_heartbeat_ms, 0);

  EXPECT_EQ(store().GetInstallTokenByHash("install-hash")->used_at_ms, kNow + 10);
  const Result<Credential> by_hash = store().GetCredentialByHash("secret-1");
  ASSERT_TRUE(by_hash.ok()) << by_hash.status();
  EXPECT_EQ(by_hash->id, credential->id);
  EXPECT_EQ(by_hash->compute_id, "cmp_a");
  EXPECT_EQ(by_hash->secret_hash, "secret-1");
  EXPECT_EQ(by_hash->created_at_ms, kNow + 10);
  EXPECT_EQ(by_hash->revoke_reason, "");
  EXPECT_EQ(by_hash->hostname, "ctl01.cluster.internal");
  EXPECT_EQ(by_hash->daemon_version, "0.1.0");
  EXPECT_EQ(by_hash->slurm_version, "22.05.8");
  EXPECT_EQ(by_hash->role, "controller");
  EXPECT_EQ(store().GetCredential(credential->id)->secret_hash, "secret-1");

  // The join a compute's requests are authenticated with: the same credential, and its compute
  // as GetCompute reads it, every field.
  const Result<Store::CredentialAndCompute> both =
      store().GetCredentialAndComputeByHash("secret-1");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->credential.id, by_hash->id);
  EXPECT_EQ(both->credential.secret_hash, "secret-1");
  EXPECT_EQ(both->credential.hostname, "ctl01.cluster.internal");
  EXPECT_EQ(both->credential.role, "controller");
  const Result<Compute> compute = store().GetCompute("cmp_a");
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ(both->compute.id, compute->id);
  EXPECT_EQ(both->compute.org_id, compute->org_id);
  EXPECT_EQ(both->compute.name, compute->name);
  EXPECT_EQ(both->compute.state, compute->state);
  EXPECT_EQ(both->compute.created_at_ms, compute->created_at_ms);
  EXPECT_EQ(both->compute.deprovisioned_at_ms, compute->deprovisioned_at_ms);
  EXPECT_EQ(store().GetCredentialAndComputeByHash("secret-2").status().code(),
            StatusCode::kNotFound);
}

TEST_P(ExchangeTest, CredentialFieldsAreStoredVerbatim) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", kOddText);
  Credential offered;
  offered.secret_hash = kOddText;
  offered.hostname = kOddText;
  offered.daemon_version = kOddText;
  offered.slurm_version = kOddText;
  offered.role = kOddText;
  ASSERT_TRUE(store().ExchangeInstallToken(kOddText, offered, kNow).ok());
  const Result<Credential> found = store().GetCredentialByHash(kOddText);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->secret_hash, kOddText);
  EXPECT_EQ(found->hostname, kOddText);
  EXPECT_EQ(found->daemon_version, kOddText);
  EXPECT_EQ(found->slurm_version, kOddText);
  EXPECT_EQ(found->role, kOddText);
}

TEST_P(ExchangeTest, NewCredentialReplacesThePreviousOne) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  const Credential first = Enroll("cmp_a", "secret-1");
  const Credential other = Enroll("cmp_b", "secret-b");
  IssueToken("cmp_a", "reinstall", kNow + kHour);
  const Result<Credential> second =
      store().ExchangeInstallToken("reinstall", CredentialWithSecret("secret-2"), kNow + kHour);
  ASSERT_TRUE(second.ok()) << second.status();

  const Result<Credential> old = store().GetCredential(first.id);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->revoked_at_ms, kNow + kHour);
  EXPECT_EQ(old->revoke_reason, "replaced");
  EXPECT_EQ(store().GetCredential(second->id)->revoked_at_ms, 0);
  EXPECT_EQ(store().GetCredential(other.id)->revoked_at_ms, 0);  // other computes untouched
}

TEST_P(ExchangeTest, UsedTokenIsRefused) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "t");
  ASSERT_TRUE(store().ExchangeInstallToken("t", CredentialWithSecret("s1"), kNow).ok());
  EXPECT_EQ(store().ExchangeInstallToken("t", CredentialWithSecret("s2"), kNow + 1).status(),
            FailedPreconditionError("install token has already been used"));
  EXPECT_EQ(store().GetCredentialByHash("s2").status(), NotFoundError("credential not found"));
}

TEST_P(ExchangeTest, ReplacedTokenIsRefused) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "old");
  IssueToken("cmp_a", "new", kNow + 1);
  EXPECT_EQ(store().ExchangeInstallToken("old", CredentialWithSecret("s"), kNow + 2).status(),
            FailedPreconditionError("install token has been replaced by a newer one"));
  EXPECT_TRUE(store().ExchangeInstallToken("new", CredentialWithSecret("s"), kNow + 2).ok());
}

TEST_P(ExchangeTest, ExpiredTokenIsRefusedWithItsExpiry) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "t");  // expires at kNow + 1 h
  const Status expired =
      store().ExchangeInstallToken("t", CredentialWithSecret("s"), kNow + kHour).status();
  EXPECT_EQ(expired, FailedPreconditionError("install token expired at 2023-11-14T23:13:20.000Z"));
  EXPECT_EQ(store().GetInstallTokenByHash("t")->used_at_ms, 0);
  EXPECT_TRUE(store().ExchangeInstallToken("t", CredentialWithSecret("s"), kNow + kHour - 1).ok());
}

TEST_P(ExchangeTest, UnknownTokenIsNotFoundWithoutEchoingIt) {
  const Status status =
      store().ExchangeInstallToken("no-such-hash", CredentialWithSecret("s"), kNow).status();
  EXPECT_EQ(status, NotFoundError("install token not found"));
  EXPECT_THAT(status.message(), Not(HasSubstr("no-such-hash")));
}

TEST_P(ExchangeTest, TokenOfDeprovisionedComputeIsRefused) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "t");
  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow + 1).ok());
  EXPECT_EQ(store().ExchangeInstallToken("t", CredentialWithSecret("s"), kNow + 2).status(),
            FailedPreconditionError("compute cmp_a is deprovisioned"));
}

TEST_P(ExchangeTest, DuplicateSecretRollsTheWholeExchangeBack) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  const Credential existing = Enroll("cmp_a", "taken-secret");
  IssueToken("cmp_b", "t");
  const Credential b_first = Enroll("cmp_b", "b-secret");
  IssueToken("cmp_b", "t2", kNow + 1);
  const Status status =
      store().ExchangeInstallToken("t2", CredentialWithSecret("taken-secret"), kNow + 2).status();
  EXPECT_EQ(status, AlreadyExistsError("a credential with this secret hash already exists"));
  EXPECT_THAT(status.message(), Not(HasSubstr("taken-secret")));
  // Nothing of the failed exchange stuck: the token is unused, cmp_b's credential is live.
  EXPECT_EQ(store().GetInstallTokenByHash("t2")->used_at_ms, 0);
  EXPECT_EQ(store().GetCredential(b_first.id)->revoked_at_ms, 0);
  EXPECT_EQ(store().GetCredential(existing.id)->compute_id, "cmp_a");
}

TEST_P(ExchangeTest, MissingCredentialsAreNotFound) {
  EXPECT_EQ(store().GetCredential(99).status(), NotFoundError("credential 99 not found"));
  EXPECT_EQ(store().GetCredentialByHash("nope").status(), NotFoundError("credential not found"));
}

// Runs `exchange(i)` on kThreads threads released together; returns the statuses.
template <typename Exchange>
std::vector<Status> RaceExchanges(int threads, Exchange exchange) {
  std::vector<Status> statuses(threads);
  std::atomic<int> ready = 0;
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < threads) {
        std::this_thread::yield();
      }
      statuses[i] = exchange(i);
    });
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  return statuses;
}

void ExpectExactlyOneSuccess(const std::vector<Status>& statuses) {
  int successes = 0;
  for (const Status& status : statuses) {
    if (status.ok()) {
      ++successes;
    } else {
      EXPECT_EQ(status, FailedPreconditionError("install token has already been used"));
    }
  }
  EXPECT_EQ(successes, 1);
}

TEST_P(ExchangeTest, ConcurrentExchangesOnOneStoreSucceedOnce) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "race");
  const std::vector<Status> statuses = RaceExchanges(8, [&](int i) {
    return store()
        .ExchangeInstallToken("race", CredentialWithSecret("s" + std::to_string(i)), kNow)
        .status();
  });
  ExpectExactlyOneSuccess(statuses);
}

// Eight stores on one database are eight connections, as separate server processes (replicas
// on one PostgreSQL) would have: here the database's writer lock (BEGIN IMMEDIATE, or
// PostgreSQL's advisory lock), not the store's mutex, decides the race. In-memory databases
// are private to one connection, so this runs on a file and on PostgreSQL.
class ExchangeAcrossConnectionsTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, ExchangeAcrossConnectionsTest,
                         ::testing::Values(Backing::kFile, Backing::kPostgres), BackingName);

TEST_P(ExchangeAcrossConnectionsTest, ConcurrentExchangesSucceedOnce) {
  MakeCompute("cmp_a");
  IssueToken("cmp_a", "race");
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kThreads; ++i) {
    Result<std::unique_ptr<Store>> opened = OpenAnother();
    ASSERT_TRUE(opened.ok()) << opened.status();
    stores.push_back(std::move(opened).value());
  }
  const std::vector<Status> statuses = RaceExchanges(kThreads, [&](int i) {
    return stores[i]
        ->ExchangeInstallToken("race", CredentialWithSecret("s" + std::to_string(i)), kNow)
        .status();
  });
  ExpectExactlyOneSuccess(statuses);
}

}  // namespace
}  // namespace sqlite_store_exchange_test
}  // namespace expanse::store
