// API tokens people make for scripts and `expanse job report`: POST/GET
// /api/v1/orgs/{org}/api-tokens and .../{id}/revoke, against a real ServerApp on loopback.
#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_tokens_test {
namespace {

using api_testing::ApiTest;
using api_testing::kStart;
using nlohmann::json;

class ApiTokensTest : public ApiTest {
 protected:
  // A signed-in session of `email`: its Cookie and X-CSRF-Token headers.
  httplib::Headers SignIn(const std::string& email, const std::string& password) {
    Reply login =
        Call("POST", "/api/v1/session", json{{"email", email}, {"password", password}}.dump());
    EXPECT_EQ(login.status, 200) << login.body;
    std::string cookie;
    for (const auto& [k, v] : login.headers) {
      if (k == "Set-Cookie")
        cookie = v.substr(0, v.find(';'));
    }
    return {{"Cookie", cookie}, {"X-CSRF-Token", login.body.value("csrf_token", "")}};
  }

  Reply Make(const httplib::Headers& who, const json& body) {
    return Call("POST", "/api/v1/orgs/acme/api-tokens", body.dump(), who);
  }
};

TEST_F(ApiTokensTest, AMemberMakesAReadTokenThatReadsAndDoesNothingElse) {
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "ana@acme.example", "pw-ana-1", store::Role::kMember, false)
                  .ok());
  const httplib::Headers ana = SignIn("ana@acme.example", "pw-ana-1");
  Reply made = Make(ana, {{"name", "job reports"}, {"scopes", {"read"}}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string token = made.body.value("token", "");
  EXPECT_EQ(token.rfind("exp_at_", 0), 0u);
  EXPECT_EQ(made.body["scopes"], json({"read"}));
  EXPECT_EQ(made.body["expires_at_ms"].get<int64_t>(), kStart + 90 * 86'400'000LL);
  EXPECT_FALSE(made.body.contains("token_hash"));

  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token)).status, 200);
  Reply create =
      Call("POST", "/api/v1/orgs/acme/computes", R"({"name":"c","type":"slurm"})", Bearer(token));
  EXPECT_EQ(create.status, 403) << create.body;
  // No token, of any scope, can make a successor: tokens are made by people.
  for (const std::string& maker : {token, token_}) {
    Reply successor = Make(Bearer(maker), {{"name", "again"}, {"scopes", {"read"}}});
    EXPECT_EQ(successor.status, 403) << successor.body;
  }
  // Nor can a member hand out more than their role holds.
  Reply admin = Make(ana, {{"name", "too much"}, {"scopes", {"admin"}}});
  EXPECT_EQ(admin.status, 403) << admin.body;
  EXPECT_EQ(Code(admin), "forbidden");

  // The member sees their own token, never its secret; the owner's admin token sees all.
  Reply mine = Call("GET", "/api/v1/orgs/acme/api-tokens", "", ana);
  ASSERT_EQ(mine.status, 200) << mine.body;
  ASSERT_EQ(mine.body["api_tokens"].size(), 1u);
  EXPECT_EQ(mine.body["api_tokens"][0]["name"], "job reports");
  EXPECT_EQ(mine.body.dump().find(token), std::string::npos);
  Reply all = Call("GET", "/api/v1/orgs/acme/api-tokens", "", Bearer(token_));
  EXPECT_EQ(all.body["api_tokens"].size(), 2u);  // the bootstrap's and ana's

  // A leaked read token cannot revoke its owner's tokens; the owner's session can.
  const int64_t id = made.body["id"];
  EXPECT_EQ(Call("POST", "/api/v1/orgs/acme/api-tokens/" + std::to_string(id) + "/revoke", "",
                 Bearer(token))
                .status,
            403);
  // Revoked, it stops working at once; the audit log has both events.
  Reply revoked =
      Call("POST", "/api/v1/orgs/acme/api-tokens/" + std::to_string(id) + "/revoke", "", ana);
  EXPECT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token)).status, 401);
  const std::string audit = Call("GET", "/api/v1/orgs/acme/audit", "", Bearer(token_)).body.dump();
  EXPECT_NE(audit.find("api_token.issued"), std::string::npos);
  EXPECT_NE(audit.find("api_token.revoked"), std::string::npos);
  EXPECT_EQ(audit.find(token), std::string::npos);
}

TEST_F(ApiTokensTest, BadRequestsAreRefusedWithTheReason) {
  const httplib::Headers owner = SignIn("owner@acme.example", "pw-owner");
  for (const json& body :
       {json{{"name", "x"}}, json{{"name", "x"}, {"scopes", json::array()}},
        json{{"name", "x"}, {"scopes", {"read", "root"}}}, json{{"name", "x"}, {"scopes", {1}}},
        json{{"name", ""}, {"scopes", {"read"}}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"expires_in_days", 0}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"expires_in_days", 366}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"expires_in_days", "soon"}}}) {
    Reply r = Make(owner, body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
  }
  Reply year = Make(owner, {{"name", "year"}, {"scopes", {"read"}}, {"expires_in_days", 365}});
  ASSERT_EQ(year.status, 201) << year.body;
  EXPECT_EQ(year.body["expires_at_ms"].get<int64_t>(), kStart + 365 * 86'400'000LL);
  // Another organisation, an unknown or someone else's token: absent.
  EXPECT_EQ(Call("POST", "/api/v1/orgs/nope/api-tokens", R"({"name":"x","scopes":["read"]})", owner)
                .status,
            404);
  EXPECT_EQ(Call("POST", "/api/v1/orgs/acme/api-tokens/999/revoke", "", owner).status, 404);
  EXPECT_EQ(Call("POST", "/api/v1/orgs/acme/api-tokens/x1/revoke", "", owner).status, 404);
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "bo@acme.example", "pw-bo-123", store::Role::kMember, false)
                  .ok());
  const std::string year_id = std::to_string(year.body["id"].get<int64_t>());
  EXPECT_EQ(Call("POST", "/api/v1/orgs/acme/api-tokens/" + year_id + "/revoke", "",
                 SignIn("bo@acme.example", "pw-bo-123"))
                .status,
            404);
}

// Each scope needs the role that holds it; another organisation is absent, not forbidden.
TEST_F(ApiTokensTest, ScopesFollowTheRoleAndOrganisationsStayApart) {
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "vic@acme.example", "pw-vic-12", store::Role::kViewer, false)
                  .ok());
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "mo@acme.example", "pw-mo-123", store::Role::kMember, false)
                  .ok());
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "reg@acme.example", "pw-reg-12", store::Role::kMember, true)
                  .ok());
  const json compute_scope = {{"name", "ci"}, {"scopes", {"compute:register"}}};
  EXPECT_EQ(Make(SignIn("vic@acme.example", "pw-vic-12"), compute_scope).status, 403);
  EXPECT_EQ(Make(SignIn("mo@acme.example", "pw-mo-123"), compute_scope).status, 403);
  Reply reg = Make(SignIn("reg@acme.example", "pw-reg-12"), compute_scope);
  EXPECT_EQ(reg.status, 201) << reg.body;
  Reply viewer_read =
      Make(SignIn("vic@acme.example", "pw-vic-12"), {{"name", "read"}, {"scopes", {"read"}}});
  EXPECT_EQ(viewer_read.status, 201) << viewer_read.body;

  // Another organisation's owner, and a token made in acme, see no acme and no beta.
  ASSERT_TRUE(
      app_->control().Bootstrap("beta", "Beta", "owner@beta.example", "pw-beta-1", "t").ok());
  Reply other = Call("POST", "/api/v1/orgs/acme/api-tokens", R"({"name":"x","scopes":["read"]})",
                     SignIn("owner@beta.example", "pw-beta-1"));
  EXPECT_EQ(other.status, 404) << other.body;
  const std::string acme_token = viewer_read.body.value("token", "");
  EXPECT_EQ(Call("GET", "/api/v1/orgs/beta/api-tokens", "", Bearer(acme_token)).status, 404);
}

// A disabled account's tokens stop working with it, as its sessions do; and a person holds at
// most 50 live tokens in an organisation.
TEST_F(ApiTokensTest, DisabledAccountsLoseTheirTokensAndTokensAreCapped) {
  ASSERT_TRUE(app_->control()
                  .AddUser("acme", "ana@acme.example", "pw-ana-1", store::Role::kMember, false)
                  .ok());
  const httplib::Headers ana = SignIn("ana@acme.example", "pw-ana-1");
  std::string token;
  for (int i = 0; i < 50; ++i) {
    Reply made = Make(ana, {{"name", "t" + std::to_string(i)}, {"scopes", {"read"}}});
    ASSERT_EQ(made.status, 201) << i << " " << made.body;
    token = made.body.value("token", "");
  }
  Reply fifty_first = Make(ana, {{"name", "one too many"}, {"scopes", {"read"}}});
  EXPECT_EQ(fifty_first.status, 429) << fifty_first.body;
  EXPECT_EQ(Code(fifty_first), "too_many_tokens");

  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token)).status, 200);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "db.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE users SET disabled = 1 WHERE email = 'ana@acme.example'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token)).status, 401);
}

}  // namespace
}  // namespace api_tokens_test
}  // namespace expanse::server
