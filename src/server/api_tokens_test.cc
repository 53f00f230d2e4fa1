// API tokens people make for scripts and `expanse job report`: POST/GET
// /api/v1/orgs/{org}/api-tokens and .../{id}/revoke, against a real ServerApp on loopback.
#include <string>

#include <gtest/gtest.h>

#include "server/api_test_util.h"

namespace expanse::server {
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
  // A read token cannot make itself a successor.
  Reply successor = Make(Bearer(token), {{"name", "again"}, {"scopes", {"read"}}});
  EXPECT_EQ(successor.status, 403) << successor.body;
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

  // Revoked, it stops working at once; the audit log has both events.
  const int64_t id = made.body["id"];
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
  const httplib::Headers owner = Bearer(token_);
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

}  // namespace
}  // namespace expanse::server
