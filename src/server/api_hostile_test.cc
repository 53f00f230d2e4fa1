// The HTTP API of a real ServerApp against hostile callers: byte ranges on the console page,
// a release file and API answers; sign-in guessing (normalised emails, a limit per address
// and account that leaves the owner a way in, a ceiling per account); probing organisation
// and compute ids; and where sign-in events are audited.

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/http_test_util.h"
#include "server/api_test_util.h"

namespace expanse::server {
namespace api_hostile_test {
namespace {

using api_testing::ApiTest;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ManyRanges(int count) {
  std::string header = "bytes=0-";
  for (int i = 1; i < count; ++i)
    header += ",0-";
  return header;
}

class ApiHostileTest : public ApiTest {
 protected:
  // POST /api/v1/session from `source` (a 127.0.0.0/8 address: all of it is loopback on
  // Linux), over a connection of its own; returns the status.
  int LoginFrom(const std::string& source, const std::string& email, const std::string& password) {
    const std::string body = nlohmann::json({{"email", email}, {"password", password}}).dump();
    const std::string request =
        "POST /api/v1/session HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    const std::string answer = http::testing::SendRawRequest(app_->control_port(), request, source);
    // "HTTP/1.1 200 OK"
    return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : 0;
  }

  std::string AuditActions() {
    Reply audit = Call("GET", "/api/v1/orgs/acme/audit?limit=100", "", Bearer(token_));
    EXPECT_EQ(audit.status, 200) << audit.body;
    std::string actions;
    for (const auto& e : audit.body["events"])
      actions += e["action"].get<std::string>() + " ";
    return actions;
  }
};

TEST_F(ApiHostileTest, ConsolePageTakesOneRangeAtMost) {
  httplib::Result whole = client_->Get("/");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200);
  EXPECT_EQ(whole->get_header_value("Accept-Ranges"), "bytes");
  httplib::Result many = client_->Get("/", {{"Range", ManyRanges(2000)}});
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 200);
  EXPECT_EQ(many->body, whole->body);  // once, not 2,000 times
  httplib::Result one = client_->Get("/", {{"Range", "bytes=0-14"}});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 206);
  EXPECT_EQ(one->body, whole->body.substr(0, 15));
}

TEST_F(ApiHostileTest, ApiAnswersIgnoreRange) {
  httplib::Result me =
      client_->Get("/api/v1/me", {{"Authorization", "Bearer " + token_}, {"Range", "bytes=0-3"}});
  ASSERT_TRUE(me);
  EXPECT_EQ(me->status, 200);
  EXPECT_FALSE(me->has_header("Content-Range"));
  EXPECT_TRUE(nlohmann::json::parse(me->body, nullptr, false).is_object()) << me->body;
  httplib::Result error = client_->Get("/api/v1/me", {{"Range", ManyRanges(500)}});
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 401);
  EXPECT_TRUE(nlohmann::json::parse(error->body, nullptr, false).is_object()) << error->body;
}

TEST_F(ApiHostileTest, UpperCasedOrPaddedEmailsShareTheAccountsLimit) {
  const char* spellings[] = {"owner@acme.example", "OWNER@ACME.EXAMPLE", " Owner@Acme.Example ",
                             "owner@ACME.example\t", "Owner@acme.example"};
  for (const char* email : spellings) {
    Reply r = Call("POST", "/api/v1/session",
                   nlohmann::json({{"email", email}, {"password", "guess"}}).dump());
    EXPECT_EQ(r.status, 401) << email;
    EXPECT_EQ(Code(r), "login_failed") << email;
  }
  Reply limited =
      Call("POST", "/api/v1/session", R"({"email":"OWNER@acme.EXAMPLE","password":"guess"})");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(Code(limited), "rate_limited");
}

TEST_F(ApiHostileTest, GuessingFromOneAddressDoesNotLockTheOwnerOut) {
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(LoginFrom("127.0.0.9", "owner@acme.example", "guess"), 401);
  EXPECT_EQ(LoginFrom("127.0.0.9", "owner@acme.example", "pw-owner"), 429);
  // The owner, from their own address, signs in; upper-cased too.
  EXPECT_EQ(LoginFrom("127.0.0.10", "Owner@Acme.Example", "pw-owner"), 200);
}

TEST_F(ApiHostileTest, ManyAddressesMeetThePerAccountCeiling) {
  // 100 failures an hour over all addresses (5 each from 20 addresses) ...
  for (int host = 0; host < 20; ++host) {
    const std::string source = "127.0.1." + std::to_string(host + 1);
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(LoginFrom(source, "owner@acme.example", "guess"), 401) << source;
  }
  // ... then the account waits, from anywhere, and other accounts do not.
  EXPECT_EQ(LoginFrom("127.0.2.1", "owner@acme.example", "pw-owner"), 429);
  EXPECT_EQ(LoginFrom("127.0.2.1", "nobody@acme.example", "guess"), 401);
  clock_.Advance(60 * 60 * 1000);
  EXPECT_EQ(LoginFrom("127.0.2.1", "owner@acme.example", "pw-owner"), 200);
}

TEST_F(ApiHostileTest, UnknownAndForeignIdsAnswerTheSame) {
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok());
  const std::string theirs = NewCompute(other->api_token, "other");
  auto same = [](const Reply& a, const Reply& b) {
    EXPECT_EQ(a.status, 404);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.body, b.body);
  };
  same(Call("GET", "/api/v1/orgs/other/computes", "", Bearer(token_)),
       Call("GET", "/api/v1/orgs/no-such-org/computes", "", Bearer(token_)));
  same(
      Call("POST", "/api/v1/orgs/other/computes", R"({"name":"x","type":"slurm"})", Bearer(token_)),
      Call("POST", "/api/v1/orgs/no-such-org/computes", R"({"name":"x","type":"slurm"})",
           Bearer(token_)));
  same(Call("GET", "/api/v1/orgs/other/audit", "", Bearer(token_)),
       Call("GET", "/api/v1/orgs/no-such-org/audit", "", Bearer(token_)));
  same(Call("GET", "/api/v1/orgs/other/jobs", "", Bearer(token_)),
       Call("GET", "/api/v1/orgs/no-such-org/jobs", "", Bearer(token_)));
  for (const std::string suffix : {"", "/nodes", "/jobs/1", "/jobs/1/stacks"}) {
    same(Call("GET", "/api/v1/computes/" + theirs + suffix, "", Bearer(token_)),
         Call("GET", "/api/v1/computes/cmp_nope" + suffix, "", Bearer(token_)));
  }
  for (const std::string action : {"/install-tokens", "/deprovision"}) {
    same(Call("POST", "/api/v1/computes/" + theirs + action, "", Bearer(token_)),
         Call("POST", "/api/v1/computes/cmp_nope" + action, "", Bearer(token_)));
  }
  Reply r = Call("GET", "/api/v1/orgs/no-such-org/computes", "", Bearer(token_));
  EXPECT_EQ(Code(r), "not_found");
  EXPECT_EQ(r.body["error"]["message"], "no such organization or compute");
}

// Another site's form posting a sign-in (login CSRF) is refused; the console's own pages and
// clients that are not browsers (no Sec-Fetch-Site) sign in.
TEST_F(ApiHostileTest, ASignInFromAnotherSiteIsRefused) {
  const std::string body = R"({"email":"owner@acme.example","password":"pw-owner"})";
  for (const std::string site : {"cross-site", "same-site"}) {
    Reply r = Call("POST", "/api/v1/session", body, {{"Sec-Fetch-Site", site}});
    EXPECT_EQ(r.status, 403) << site;
    EXPECT_EQ(Code(r), "cross_site_sign_in") << site;
  }
  EXPECT_EQ(Call("POST", "/api/v1/session", body, {{"Sec-Fetch-Site", "same-origin"}}).status, 200);
  EXPECT_EQ(Call("POST", "/api/v1/session", body).status, 200);
}

TEST_F(ApiHostileTest, SignInsAreAuditedInTheUsersOrganisation) {
  Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"nope"})");
  Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})");
  Call("POST", "/api/v1/session", R"({"email":"stranger@acme.example","password":"nope"})");
  const std::string actions = AuditActions();
  EXPECT_THAT(actions, HasSubstr("login.failed"));
  EXPECT_THAT(actions, HasSubstr("login.succeeded"));
  Reply audit = Call("GET", "/api/v1/orgs/acme/audit?limit=100", "", Bearer(token_));
  int anonymous = 0;
  for (const auto& e : audit.body["events"]) {
    if (e.value("actor", "") == "anonymous")
      ++anonymous;
  }
  EXPECT_EQ(anonymous, 0);  // an unknown email belongs to no organisation
  // Another organisation's admins do not see them.
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok());
  Reply theirs = Call("GET", "/api/v1/orgs/other/audit?limit=100", "", Bearer(other->api_token));
  ASSERT_EQ(theirs.status, 200);
  for (const auto& e : theirs.body["events"])
    EXPECT_THAT(e["action"].get<std::string>(), ::testing::Not(StartsWith("login.")));
}

class ReleaseRangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("expanse-release-range-" + std::to_string(getpid()) + "-" + info->name());
    std::filesystem::create_directories(root_ / "releases");
    for (int i = 0; i < (1 << 20); ++i)
      file_ += static_cast<char>(i * 7);
    std::ofstream(root_ / "releases" / "daemon.tar.gz", std::ios::binary) << file_;
    ServerOptions options;
    options.db_path = (root_ / "db.sqlite").string();
    options.control_listen = "127.0.0.1:0";
    options.releases_dir = (root_ / "releases").string();
    auto app = ServerApp::Create(options, clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", app_->control_port());
  }
  void TearDown() override {
    if (app_)
      app_->Stop();
    std::filesystem::remove_all(root_);
  }

  ManualClock clock_{api_testing::kStart};
  std::filesystem::path root_;
  std::string file_;
  std::unique_ptr<ServerApp> app_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ReleaseRangeTest, ManyRangesOnAReleaseFileGetItOnce) {
  httplib::Result many = client_->Get("/releases/daemon.tar.gz", {{"Range", ManyRanges(500)}});
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 200);
  EXPECT_EQ(many->body.size(), file_.size());
  // Resuming a download: one range.
  httplib::Result rest = client_->Get("/releases/daemon.tar.gz", {{"Range", "bytes=1048000-"}});
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->status, 206);
  EXPECT_EQ(rest->body, file_.substr(1048000));
  EXPECT_EQ(rest->get_header_value("Content-Range"), "bytes 1048000-1048575/1048576");
}

}  // namespace
}  // namespace api_hostile_test
}  // namespace expanse::server
