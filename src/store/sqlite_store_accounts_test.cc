// SqliteStore: organisations, users, memberships, sessions and API tokens.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_accounts_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class AccountsTest : public store_testing::SqliteStoreTest {};
INSTANTIATE_TEST_SUITE_P(Backings, AccountsTest, kBackings, BackingName);

// --- organisations ---------------------------------------------------------------------------

TEST_P(AccountsTest, CreatesAndFindsOrganizations) {
  const Result<Organization> created = store().CreateOrganization("acme-2", "Acme Two", kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_GT(created->id, 0);
  EXPECT_EQ(created->slug, "acme-2");
  EXPECT_EQ(created->name, "Acme Two");
  EXPECT_EQ(created->created_at_ms, kNow);

  const Result<Organization> by_id = store().GetOrganization(created->id);
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(by_id->slug, "acme-2");
  const Result<Organization> by_slug = store().GetOrganizationBySlug("acme-2");
  ASSERT_TRUE(by_slug.ok()) << by_slug.status();
  EXPECT_EQ(by_slug->id, created->id);
}

TEST_P(AccountsTest, DuplicateSlugAlreadyExists) {
  MakeOrganization("acme");
  EXPECT_EQ(store().CreateOrganization("acme", "Other", kNow).status(),
            AlreadyExistsError("organization slug \"acme\" already exists"));
}

TEST_P(AccountsTest, InvalidSlugsAreRefused) {
  const std::vector<std::string> bad_slugs = {
      "", "Acme", "a b", "acme_1", "a'--", std::string(64, 'a'), "caf\xC3\xA9"};
  for (const std::string& slug : bad_slugs) {
    const Status status = store().CreateOrganization(slug, "x", kNow).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << slug;
    EXPECT_THAT(status.message(), HasSubstr("use 1 to 63 characters from a-z, 0-9 and '-'"));
  }
  EXPECT_EQ(store().CreateOrganization("Bad\"", "x", kNow).status().message(),
            "invalid organization slug \"Bad\\\"\": use 1 to 63 characters from a-z, 0-9 and '-'");
  EXPECT_TRUE(store().CreateOrganization(std::string(63, 'a'), "x", kNow).ok());
}

TEST_P(AccountsTest, MissingOrganizationsAreNotFound) {
  EXPECT_EQ(store().GetOrganization(42).status(), NotFoundError("organization 42 not found"));
  EXPECT_EQ(store().GetOrganizationBySlug("nope").status(),
            NotFoundError("organization slug \"nope\" not found"));
  // A slug lookup with SQL in it is just a string that matches nothing.
  MakeOrganization("acme");
  EXPECT_EQ(store().GetOrganizationBySlug("' OR '1'='1").status().code(), StatusCode::kNotFound);
}

TEST_P(AccountsTest, OrganizationNameIsStoredVerbatim) {
  const Result<Organization> created = store().CreateOrganization("odd", kOddText, kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(store().GetOrganization(created->id)->name, kOddText);
}

// --- users -------------------------------------------------------------------------------------

TEST_P(AccountsTest, CreatesAndFindsUsers) {
  const Result<User> created =
      store().CreateUser("alice@example.com", "Alice", "$argon2id$v=19$abc", kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_GT(created->id, 0);
  EXPECT_EQ(created->email, "alice@example.com");
  EXPECT_EQ(created->display_name, "Alice");
  EXPECT_EQ(created->password_hash, "$argon2id$v=19$abc");
  EXPECT_EQ(created->created_at_ms, kNow);
  EXPECT_FALSE(created->disabled);
  EXPECT_EQ(store().GetUser(created->id)->email, "alice@example.com");
}

TEST_P(AccountsTest, EmailIsCaseInsensitiveAndStoredLowerCase) {
  const User user = MakeUser("Alice.Smith@Example.COM");
  EXPECT_EQ(user.email, "alice.smith@example.com");
  for (const char* spelling :
       {"alice.smith@example.com", "ALICE.SMITH@EXAMPLE.COM", "Alice.Smith@example.com"}) {
    const Result<User> found = store().GetUserByEmail(spelling);
    ASSERT_TRUE(found.ok()) << spelling << ": " << found.status();
    EXPECT_EQ(found->id, user.id);
  }
  EXPECT_EQ(store().CreateUser("ALICE.smith@example.com", "Imposter", "h", kNow).status(),
            AlreadyExistsError("user with e-mail \"alice.smith@example.com\" already exists"));
}

TEST_P(AccountsTest, EmailFoldsOnlyAscii) {
  // "É" and "é" are different addresses to the store: folding beyond ASCII is not something
  // mail systems agree on.
  const User upper = MakeUser("\xC3\x89lise@example.com");
  const User lower = MakeUser("\xC3\xA9lise@example.com");
  EXPECT_NE(upper.id, lower.id);
  EXPECT_EQ(upper.email, "\xC3\x89lise@example.com");
}

TEST_P(AccountsTest, EmptyEmailIsRefused) {
  EXPECT_EQ(store().CreateUser("", "x", "h", kNow).status(),
            InvalidArgumentError("user e-mail address is empty"));
}

TEST_P(AccountsTest, MissingUsersAreNotFound) {
  EXPECT_EQ(store().GetUser(7).status(), NotFoundError("user 7 not found"));
  EXPECT_EQ(store().GetUserByEmail("Bob@Example.com").status(),
            NotFoundError("user with e-mail \"bob@example.com\" not found"));
}

TEST_P(AccountsTest, UserFieldsAreStoredVerbatim) {
  const std::string odd_email = "o'brien+\"x\";--@example.com";
  const Result<User> created = store().CreateUser(odd_email, kOddText, kOddText, kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  const Result<User> found = store().GetUserByEmail(odd_email);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->email, odd_email);
  EXPECT_EQ(found->display_name, kOddText);
  EXPECT_EQ(found->password_hash, kOddText);
}

TEST_P(AccountsTest, SetUserPasswordReplacesTheHash) {
  const User user = MakeUser();
  ASSERT_TRUE(store().SetUserPassword(user.id, "$argon2id$new").ok());
  EXPECT_EQ(store().GetUser(user.id)->password_hash, "$argon2id$new");
  EXPECT_EQ(store().SetUserPassword(user.id + 100, "x"),
            NotFoundError("user " + std::to_string(user.id + 100) + " not found"));
}

// --- memberships -------------------------------------------------------------------------------

TEST_P(AccountsTest, PutMembershipInsertsThenReplaces) {
  const Organization organization = MakeOrganization();
  const User user = MakeUser();
  Membership membership{organization.id, user.id, Role::kMember, true, ""};
  ASSERT_TRUE(store().PutMembership(membership).ok());
  Result<Membership> stored = store().GetMembership(organization.id, user.id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->role, Role::kMember);
  EXPECT_TRUE(stored->can_register_compute);
  EXPECT_EQ(stored->slurm_user, "");

  membership.role = Role::kAdmin;
  membership.can_register_compute = false;
  membership.slurm_user = "alice";
  ASSERT_TRUE(store().PutMembership(membership).ok());
  stored = store().GetMembership(organization.id, user.id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->role, Role::kAdmin);
  EXPECT_FALSE(stored->can_register_compute);
  EXPECT_EQ(stored->slurm_user, "alice");
  EXPECT_EQ(store().ListMembershipsOfUser(user.id)->front().slurm_user, "alice");
  EXPECT_EQ(store().ListMembershipsOfUser(user.id)->size(), 1U);
}

TEST_P(AccountsTest, EveryRoleRoundTrips) {
  const User user = MakeUser();
  const std::vector<Role> roles = {Role::kOwner, Role::kAdmin, Role::kMember, Role::kViewer};
  for (std::size_t i = 0; i < roles.size(); ++i) {
    const Organization organization = MakeOrganization("org" + std::to_string(i));
    ASSERT_TRUE(store().PutMembership({organization.id, user.id, roles[i], false, ""}).ok());
    EXPECT_EQ(store().GetMembership(organization.id, user.id)->role, roles[i]);
  }
}

TEST_P(AccountsTest, ListMembershipsOfUserIsOrderedByOrganization) {
  const Organization first = MakeOrganization("first");
  const Organization second = MakeOrganization("second");
  const Organization third = MakeOrganization("third");
  const User alice = MakeUser("alice@example.com");
  const User bob = MakeUser("bob@example.com");
  ASSERT_TRUE(store().PutMembership({third.id, alice.id, Role::kViewer, false, ""}).ok());
  ASSERT_TRUE(store().PutMembership({first.id, alice.id, Role::kOwner, false, ""}).ok());
  ASSERT_TRUE(store().PutMembership({second.id, bob.id, Role::kOwner, false, ""}).ok());

  const Result<std::vector<Membership>> listed = store().ListMembershipsOfUser(alice.id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2U);
  EXPECT_EQ((*listed)[0].org_id, first.id);
  EXPECT_EQ((*listed)[0].role, Role::kOwner);
  EXPECT_EQ((*listed)[1].org_id, third.id);
  EXPECT_THAT(*store().ListMembershipsOfUser(bob.id + 100), IsEmpty());
}

TEST_P(AccountsTest, MembershipErrorsNameWhatIsMissing) {
  const Organization organization = MakeOrganization();
  const User user = MakeUser();
  EXPECT_EQ(store().GetMembership(organization.id, user.id).status(),
            NotFoundError("user " + std::to_string(user.id) + " is not a member of organization " +
                          std::to_string(organization.id)));
  EXPECT_EQ(store().PutMembership({organization.id + 50, user.id, Role::kOwner, false, ""}),
            NotFoundError("organization " + std::to_string(organization.id + 50) + " not found"));
  EXPECT_EQ(store().PutMembership({organization.id, user.id + 50, Role::kOwner, false, ""}),
            NotFoundError("user " + std::to_string(user.id + 50) + " not found"));
  // An enum value outside the known roles is caught by the table's CHECK.
  const Status bad_role =
      store().PutMembership({organization.id, user.id, static_cast<Role>(17), false, ""});
  EXPECT_EQ(bad_role.code(), StatusCode::kInvalidArgument) << bad_role;
  // SQLite says "CHECK constraint failed", PostgreSQL "violates check constraint".
  EXPECT_THAT(bad_role.message(), ::testing::AnyOf(HasSubstr("CHECK constraint failed"),
                                                   HasSubstr("check constraint")));
}

// --- sessions ----------------------------------------------------------------------------------

TEST_P(AccountsTest, SessionLivesUntilItExpires) {
  const User user = MakeUser();
  const Session session{"session-hash", user.id, "csrf-1", kNow, kNow + kHour};
  ASSERT_TRUE(store().CreateSession(session).ok());

  const Result<Session> found = store().GetSession("session-hash", kNow + kHour - 1);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id_hash, "session-hash");
  EXPECT_EQ(found->user_id, user.id);
  EXPECT_EQ(found->csrf_token, "csrf-1");
  EXPECT_EQ(found->created_at_ms, kNow);
  EXPECT_EQ(found->expires_at_ms, kNow + kHour);

  const Status expired = store().GetSession("session-hash", kNow + kHour).status();
  EXPECT_EQ(expired, NotFoundError("session expired at 2023-11-14T23:13:20.000Z"));
  EXPECT_THAT(expired.message(), Not(HasSubstr("session-hash")));
}

TEST_P(AccountsTest, DeletedAndUnknownSessionsAreNotFound) {
  const User user = MakeUser();
  ASSERT_TRUE(store().CreateSession({"h1", user.id, "c", kNow, kNow + kHour}).ok());
  ASSERT_TRUE(store().DeleteSession("h1").ok());
  EXPECT_EQ(store().GetSession("h1", kNow).status(), NotFoundError("session not found"));
  EXPECT_EQ(store().DeleteSession("h1"), NotFoundError("session not found"));
}

TEST_P(AccountsTest, ANewSessionDropsTheUsersExpiredOnes) {
  const User user = MakeUser();
  const User other = MakeUser("other@example.org");
  ASSERT_TRUE(store().CreateSession({"old", user.id, "c", kNow - 2 * kHour, kNow - kHour}).ok());
  ASSERT_TRUE(store().CreateSession({"live", user.id, "c", kNow - 60, kNow + kHour}).ok());
  ASSERT_TRUE(store().CreateSession({"others", other.id, "c", kNow - 2 * kHour, kNow}).ok());
  ASSERT_TRUE(store().CreateSession({"new", user.id, "c", kNow, kNow + kHour}).ok());
  // Gone, even asked at a time it was still valid; the live one and another user's stay.
  EXPECT_EQ(store().GetSession("old", kNow - 2 * kHour).status(),
            NotFoundError("session not found"));
  EXPECT_TRUE(store().GetSession("live", kNow).ok());
  EXPECT_TRUE(store().GetSession("others", kNow - 1).ok());
}

TEST_P(AccountsTest, SessionErrors) {
  const User user = MakeUser();
  ASSERT_TRUE(store().CreateSession({"h1", user.id, "c", kNow, kNow + kHour}).ok());
  EXPECT_EQ(store().CreateSession({"h1", user.id, "c2", kNow, kNow + kHour}),
            AlreadyExistsError("a session with this id already exists"));
  EXPECT_EQ(store().CreateSession({"h2", user.id + 9, "c", kNow, kNow + kHour}),
            NotFoundError("user " + std::to_string(user.id + 9) + " not found"));
}

TEST_P(AccountsTest, SessionFieldsAreStoredVerbatim) {
  const User user = MakeUser();
  ASSERT_TRUE(store().CreateSession({kOddText, user.id, kOddText, kNow, kNow + kHour}).ok());
  const Result<Session> found = store().GetSession(kOddText, kNow);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id_hash, kOddText);
  EXPECT_EQ(found->csrf_token, kOddText);
}

// --- API tokens --------------------------------------------------------------------------------

ApiToken TokenOf(const User& user, const Organization& organization, const std::string& hash) {
  ApiToken token;
  token.user_id = user.id;
  token.org_id = organization.id;
  token.name = "ci";
  token.token_hash = hash;
  token.scopes = {"read", "compute:register"};
  token.created_at_ms = kNow;
  token.expires_at_ms = kNow + kHour;
  return token;
}

TEST_P(AccountsTest, ApiTokenRoundTrips) {
  const User user = MakeUser();
  const Organization organization = MakeOrganization();
  const Result<ApiToken> created = store().CreateApiToken(TokenOf(user, organization, "th"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_GT(created->id, 0);

  const Result<ApiToken> found = store().GetApiTokenByHash("th");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id, created->id);
  EXPECT_EQ(found->user_id, user.id);
  EXPECT_EQ(found->org_id, organization.id);
  EXPECT_EQ(found->name, "ci");
  EXPECT_EQ(found->token_hash, "th");
  EXPECT_THAT(found->scopes, ElementsAre("read", "compute:register"));
  EXPECT_EQ(found->created_at_ms, kNow);
  EXPECT_EQ(found->expires_at_ms, kNow + kHour);
  EXPECT_EQ(found->revoked_at_ms, 0);
}

TEST_P(AccountsTest, ApiTokensAreListedPerOrganizationAndUser) {
  const User ana = MakeUser("ana@example.org");
  const User bo = MakeUser("bo@example.org");
  const Organization acme = MakeOrganization("acme");
  const Organization beta = MakeOrganization("beta");
  ASSERT_TRUE(store().CreateApiToken(TokenOf(ana, acme, "a1")).ok());
  ASSERT_TRUE(store().CreateApiToken(TokenOf(bo, acme, "b1")).ok());
  ASSERT_TRUE(store().CreateApiToken(TokenOf(ana, beta, "a2")).ok());
  const Result<std::vector<ApiToken>> all = store().ListApiTokens(acme.id, 0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].token_hash, "a1");
  EXPECT_EQ((*all)[1].token_hash, "b1");
  const Result<std::vector<ApiToken>> anas = store().ListApiTokens(acme.id, ana.id);
  ASSERT_TRUE(anas.ok());
  ASSERT_EQ(anas->size(), 1u);
  EXPECT_EQ((*anas)[0].token_hash, "a1");
  EXPECT_TRUE(store().ListApiTokens(999, 0)->empty());
}

// Issuing and revoking in a loop keeps the newest 100 dead tokens of the maker (revoked or
// expired), not every one; live tokens and other users' stay.
TEST_P(AccountsTest, OnlyTheNewestDeadTokensOfAMakerAreKept) {
  const User ana = MakeUser("ana@example.org");
  const User bo = MakeUser("bo@example.org");
  const Organization acme = MakeOrganization("acme");
  const Result<ApiToken> live = store().CreateApiToken(TokenOf(ana, acme, "live"));
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_TRUE(
      store().RevokeApiToken(store().CreateApiToken(TokenOf(bo, acme, "bo"))->id, kNow).ok());
  for (int i = 0; i < Store::kKeptDeadApiTokens + 20; ++i) {
    const Result<ApiToken> made =
        store().CreateApiToken(TokenOf(ana, acme, "t" + std::to_string(i)));
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_TRUE(store().RevokeApiToken(made->id, kNow).ok());
  }
  ApiToken expired = TokenOf(ana, acme, "expired");
  expired.expires_at_ms = kNow - 1;  // dead once the next one is made
  ASSERT_TRUE(store().CreateApiToken(expired).ok());
  ASSERT_TRUE(store().CreateApiToken(TokenOf(ana, acme, "last")).ok());
  const Result<std::vector<ApiToken>> anas = store().ListApiTokens(acme.id, ana.id);
  ASSERT_TRUE(anas.ok()) << anas.status();
  ASSERT_EQ(anas->size(), static_cast<size_t>(Store::kKeptDeadApiTokens) + 2);
  EXPECT_EQ(anas->front().token_hash, "live");
  EXPECT_EQ((*anas)[1].token_hash, "t21");  // t0..t20 went
  EXPECT_EQ(anas->back().token_hash, "last");
  EXPECT_EQ(store().ListApiTokens(acme.id, bo.id)->size(), 1u);
}

TEST_P(AccountsTest, ApiTokenScopes) {
  const User user = MakeUser();
  const Organization organization = MakeOrganization();
  ApiToken token = TokenOf(user, organization, "none");
  token.scopes = {};
  ASSERT_TRUE(store().CreateApiToken(token).ok());
  EXPECT_THAT(store().GetApiTokenByHash("none")->scopes, IsEmpty());

  token.token_hash = "odd";
  token.scopes = {"a'b", "\"c\";--", "\xF0\x9F\x9A\x80"};
  ASSERT_TRUE(store().CreateApiToken(token).ok());
  EXPECT_THAT(store().GetApiTokenByHash("odd")->scopes,
              ElementsAre("a'b", "\"c\";--", "\xF0\x9F\x9A\x80"));

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"read", ""}, std::vector<std::string>{"read admin"},
        std::vector<std::string>{"x\ny"}}) {
    token.token_hash = "bad";
    token.scopes = bad;
    const Status status = store().CreateApiToken(token).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("scopes are non-empty and contain no blanks"));
  }
}

TEST_P(AccountsTest, ApiTokenErrorsNeverShowTheHash) {
  const User user = MakeUser();
  const Organization organization = MakeOrganization();
  ASSERT_TRUE(store().CreateApiToken(TokenOf(user, organization, "secret-hash-1")).ok());
  const Status duplicate =
      store().CreateApiToken(TokenOf(user, organization, "secret-hash-1")).status();
  EXPECT_EQ(duplicate, AlreadyExistsError("an API token with this hash already exists"));
  EXPECT_EQ(store().GetApiTokenByHash("secret-hash-2").status(),
            NotFoundError("API token not found"));

  ApiToken orphan = TokenOf(user, organization, "h");
  orphan.org_id = organization.id + 3;
  EXPECT_EQ(store().CreateApiToken(orphan).status(),
            NotFoundError("organization " + std::to_string(orphan.org_id) + " not found"));
}

TEST_P(AccountsTest, ApiTokenFieldsAreStoredVerbatim) {
  const User user = MakeUser();
  const Organization organization = MakeOrganization();
  ApiToken token = TokenOf(user, organization, kOddText);
  token.name = kOddText;
  ASSERT_TRUE(store().CreateApiToken(token).ok());
  const Result<ApiToken> found = store().GetApiTokenByHash(kOddText);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->name, kOddText);
  EXPECT_EQ(found->token_hash, kOddText);
}

TEST_P(AccountsTest, RevokeApiTokenKeepsTheFirstRevocationTime) {
  const User user = MakeUser();
  const Organization organization = MakeOrganization();
  const Result<ApiToken> created = store().CreateApiToken(TokenOf(user, organization, "th"));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(store().RevokeApiToken(created->id, kNow + 5).ok());
  EXPECT_EQ(store().GetApiTokenByHash("th")->revoked_at_ms, kNow + 5);
  ASSERT_TRUE(store().RevokeApiToken(created->id, kNow + 9).ok());
  EXPECT_EQ(store().GetApiTokenByHash("th")->revoked_at_ms, kNow + 5);
  EXPECT_EQ(store().RevokeApiToken(created->id + 1, kNow),
            NotFoundError("API token " + std::to_string(created->id + 1) + " not found"));
}

}  // namespace
}  // namespace sqlite_store_accounts_test
}  // namespace expanse::store
