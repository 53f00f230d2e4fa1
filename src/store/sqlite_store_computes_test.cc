// SqliteStore: computes and install tokens (issue and re-issue). The exchange is tested in
// sqlite_store_exchange_test.cc.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_computes_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ComputesTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, ComputesTest, kBackings, BackingName);

std::vector<std::string> IdsOf(const std::vector<Compute>& computes) {
  std::vector<std::string> ids;
  for (const Compute& compute : computes) {
    ids.push_back(compute.id);
  }
  return ids;
}

TEST_P(ComputesTest, EveryFieldRoundTripsVerbatim) {
  const Organization organization = MakeOrganization();
  Compute compute;
  compute.id = "cmp_" + kOddText;
  compute.org_id = organization.id;
  compute.name = kOddText;
  compute.type = kOddText;
  compute.state = ComputeState::kStale;
  compute.created_at_ms = kNow;
  compute.created_by_user = 77;
  compute.pinned_daemon_version = kOddText;
  compute.control_plane_url = kOddText;
  compute.data_plane_url = kOddText;
  compute.last_heartbeat_ms = kNow + 1;
  compute.controller_host = kOddText;
  compute.daemon_version = kOddText;
  compute.deprovisioned_at_ms = 0;
  const Result<Compute> created = store().CreateCompute(compute);
  ASSERT_TRUE(created.ok()) << created.status();

  const Result<Compute> found = store().GetCompute(compute.id);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id, compute.id);
  EXPECT_EQ(found->org_id, organization.id);
  EXPECT_EQ(found->name, kOddText);
  EXPECT_EQ(found->type, kOddText);
  EXPECT_EQ(found->state, ComputeState::kStale);
  EXPECT_EQ(found->created_at_ms, kNow);
  EXPECT_EQ(found->created_by_user, 77);
  EXPECT_EQ(found->pinned_daemon_version, kOddText);
  EXPECT_EQ(found->control_plane_url, kOddText);
  EXPECT_EQ(found->data_plane_url, kOddText);
  EXPECT_EQ(found->last_heartbeat_ms, kNow + 1);
  EXPECT_EQ(found->controller_host, kOddText);
  EXPECT_EQ(found->daemon_version, kOddText);
  EXPECT_EQ(found->deprovisioned_at_ms, 0);
}

TEST_P(ComputesTest, ListAllComputesSpansOrganisationsByIdUpToTheLimit) {
  const Organization acme = MakeOrganization("acme");
  const Organization beta = MakeOrganization("beta");
  MakeCompute("cmp_c", acme.id);
  MakeCompute("cmp_a", beta.id);
  MakeCompute("cmp_b", acme.id);
  Result<std::vector<Compute>> all = store().ListAllComputes(10);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, "cmp_a");
  EXPECT_EQ((*all)[1].id, "cmp_b");
  EXPECT_EQ((*all)[2].id, "cmp_c");
  EXPECT_EQ(store().ListAllComputes(2)->size(), 2u);
}

TEST_P(ComputesTest, NewComputeIsRegistered) {
  const Compute compute = MakeCompute("cmp_a");
  EXPECT_EQ(compute.state, ComputeState::kRegistered);
  EXPECT_EQ(compute.last_heartbeat_ms, 0);
}

TEST_P(ComputesTest, Errors) {
  const Compute compute = MakeCompute("cmp_a");
  Compute duplicate = compute;
  EXPECT_EQ(store().CreateCompute(duplicate).status(),
            AlreadyExistsError("compute cmp_a already exists"));
  Compute orphan = compute;
  orphan.id = "cmp_b";
  orphan.org_id = compute.org_id + 10;
  EXPECT_EQ(store().CreateCompute(orphan).status(),
            NotFoundError("organization " + std::to_string(orphan.org_id) + " not found"));
  orphan.id = "";
  EXPECT_EQ(store().CreateCompute(orphan).status(), InvalidArgumentError("compute id is empty"));
  EXPECT_EQ(store().GetCompute("cmp_zz").status(), NotFoundError("compute cmp_zz not found"));
  // An id that is not plain is quoted, so it cannot inject text into a log line.
  EXPECT_EQ(store().GetCompute("cmp\n\"x").status(),
            NotFoundError("compute \"cmp\\x0A\\\"x\" not found"));
}

TEST_P(ComputesTest, ListComputesShowsOneOrganizationInCreationOrder) {
  const Organization acme = MakeOrganization("acme");
  const Organization other = MakeOrganization("other");
  MakeCompute("cmp_b", acme.id);
  MakeCompute("cmp_x", other.id);
  MakeCompute("cmp_a", acme.id);
  const Result<std::vector<Compute>> listed = store().ListComputes(acme.id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  // Same created_at_ms: ties go by id.
  EXPECT_THAT(IdsOf(*listed), ElementsAre("cmp_a", "cmp_b"));
  EXPECT_THAT(IdsOf(*store().ListComputes(other.id)), ElementsAre("cmp_x"));
  EXPECT_THAT(*store().ListComputes(other.id + 100), IsEmpty());
}

// --- install tokens ----------------------------------------------------------------------------

TEST_P(ComputesTest, IssuedTokenRoundTrips) {
  MakeCompute("cmp_a");
  InstallToken token = TokenFor("cmp_a", "install-hash");
  token.used_at_ms = 5;  // ignored: a new token is unused
  token.created_by_user = 9;
  const Result<InstallToken> issued = store().IssueInstallToken(token);
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_GT(issued->id, 0);
  EXPECT_EQ(issued->used_at_ms, 0);

  const Result<InstallToken> found = store().GetInstallTokenByHash("install-hash");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id, issued->id);
  EXPECT_EQ(found->compute_id, "cmp_a");
  EXPECT_EQ(found->token_hash, "install-hash");
  EXPECT_EQ(found->created_at_ms, kNow);
  EXPECT_EQ(found->expires_at_ms, kNow + kHour);
  EXPECT_EQ(found->used_at_ms, 0);
  EXPECT_EQ(found->invalidated_at_ms, 0);
  EXPECT_EQ(found->created_by_user, 9);
}

TEST_P(ComputesTest, ReissuingInvalidatesTheEarlierUnusedTokenOnly) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_other");
  IssueToken("cmp_a", "first");
  ASSERT_TRUE(store()
                  .ExchangeInstallToken("first", CredentialWithSecret("s1"), kNow + 1)
                  .ok());  // "first" is now used
  IssueToken("cmp_a", "second", kNow + 10);
  IssueToken("cmp_other", "unrelated", kNow + 10);
  IssueToken("cmp_a", "third", kNow + 20);

  EXPECT_EQ(store().GetInstallTokenByHash("first")->used_at_ms, kNow + 1);
  EXPECT_EQ(store().GetInstallTokenByHash("first")->invalidated_at_ms, 0);
  EXPECT_EQ(store().GetInstallTokenByHash("second")->invalidated_at_ms, kNow + 20);
  EXPECT_EQ(store().GetInstallTokenByHash("third")->invalidated_at_ms, 0);
  EXPECT_EQ(store().GetInstallTokenByHash("unrelated")->invalidated_at_ms, 0);
}

TEST_P(ComputesTest, IssueErrors) {
  MakeCompute("cmp_a");
  InstallToken never_valid = TokenFor("cmp_a", "h");
  never_valid.expires_at_ms = never_valid.created_at_ms;
  EXPECT_EQ(store().IssueInstallToken(never_valid).status(),
            InvalidArgumentError("install token must expire after it is created (created at "
                                 "2023-11-14T22:13:20.000Z, expires at "
                                 "2023-11-14T22:13:20.000Z)"));
  EXPECT_EQ(store().IssueInstallToken(TokenFor("cmp_nope", "h")).status(),
            NotFoundError("compute cmp_nope not found"));
  EXPECT_EQ(store().GetInstallTokenByHash("h").status(), NotFoundError("install token not found"));
}

TEST_P(ComputesTest, DuplicateTokenHashChangesNothing) {
  MakeCompute("cmp_a");
  MakeCompute("cmp_b");
  IssueToken("cmp_a", "hash-a");
  IssueToken("cmp_b", "hash-b");
  // Re-using cmp_b's hash for cmp_a fails, and the failed call's invalidation of "hash-a"
  // is rolled back with it.
  EXPECT_EQ(store().IssueInstallToken(TokenFor("cmp_a", "hash-b", kNow + 5)).status(),
            AlreadyExistsError("an install token with this hash already exists"));
  EXPECT_EQ(store().GetInstallTokenByHash("hash-a")->invalidated_at_ms, 0);
}

TEST_P(ComputesTest, TokenForDeprovisionedComputeIsRefused) {
  MakeCompute("cmp_a");
  ASSERT_TRUE(store().DeprovisionCompute("cmp_a", kNow).ok());
  EXPECT_EQ(store().IssueInstallToken(TokenFor("cmp_a", "h")).status(),
            FailedPreconditionError("compute cmp_a is deprovisioned"));
}

}  // namespace
}  // namespace sqlite_store_computes_test
}  // namespace expanse::store
