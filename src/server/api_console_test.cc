// The web console as the server hands it out: the page, every asset it loads (and every module
// those import), the security headers, refusals of unknown asset paths, and the install texts
// of the Add compute panel.
#include <regex>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"
#include "server/console_assets.h"

namespace expanse::server {
namespace api_console_test {
namespace {

using api_testing::ApiTest;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class ConsoleTest : public ApiTest {
 protected:
  httplib::Result Fetch(const std::string& path) { return client_->Get(path); }
};

TEST_F(ConsoleTest, PageIsServedWithAStrictContentSecurityPolicy) {
  httplib::Result r = Fetch("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(r->body, HasSubstr("<script type=\"module\" src=\"/assets/app.js\">"));
  std::string csp = r->get_header_value("Content-Security-Policy");
  EXPECT_THAT(csp, HasSubstr("script-src 'self'"));
  EXPECT_THAT(csp, HasSubstr("frame-ancestors 'none'"));
  EXPECT_THAT(csp, Not(HasSubstr("unsafe-eval")));
  EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY");
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
}

// Everything the page links and every module any script imports is served, with a content type
// a browser accepts for it (a module served as octet-stream does not run).
TEST_F(ConsoleTest, EveryLinkedAssetAndImportedModuleIsServed) {
  httplib::Result page = Fetch("/");
  ASSERT_TRUE(page);
  std::set<std::string> pending;
  std::regex link(R"re((?:src|href)="/assets/([^"]+)")re");
  for (std::sregex_iterator it(page->body.begin(), page->body.end(), link), end; it != end; ++it)
    pending.insert((*it)[1].str());
  ASSERT_GE(pending.size(), 4u);
  std::set<std::string> seen;
  std::regex import_from(R"re(from '(\.{1,2}/[^']+)')re");
  while (!pending.empty()) {
    std::string name = *pending.begin();
    pending.erase(pending.begin());
    if (!seen.insert(name).second)
      continue;
    httplib::Result r = Fetch("/assets/" + name);
    ASSERT_TRUE(r) << name;
    ASSERT_EQ(r->status, 200) << name;
    EXPECT_FALSE(r->body.empty()) << name;
    std::string type = r->get_header_value("Content-Type");
    if (name.ends_with(".js")) {
      EXPECT_EQ(type, "text/javascript; charset=utf-8") << name;
    } else if (name.ends_with(".css")) {
      EXPECT_EQ(type, "text/css; charset=utf-8") << name;
    }
    if (!name.ends_with(".js") || name.starts_with("vendor/"))
      continue;
    // Resolve "./x.js" and "../x.js" against the importing module's directory.
    std::string dir = name.find('/') == std::string::npos ? "" : name.substr(0, name.rfind('/'));
    for (std::sregex_iterator it(r->body.begin(), r->body.end(), import_from), end; it != end;
         ++it) {
      std::string target = (*it)[1].str();
      std::string base = dir;
      while (target.starts_with("../")) {
        target = target.substr(3);
        base = base.find('/') == std::string::npos ? "" : base.substr(0, base.rfind('/'));
      }
      if (target.starts_with("./"))
        target = target.substr(2);
      pending.insert(base.empty() ? target : base + "/" + target);
    }
  }
  EXPECT_TRUE(seen.contains("pages/job.js"));
  EXPECT_TRUE(seen.contains("verdict_ribbon.js"));
  EXPECT_TRUE(seen.contains("capture.js"));
  EXPECT_TRUE(seen.contains("pages/efficiency.js"));
  EXPECT_TRUE(seen.contains("efficiency.js"));
  EXPECT_TRUE(seen.contains("vendor/uPlot.iife.min.js"));
}

TEST_F(ConsoleTest, UnknownOrEscapingAssetPathsAreRefused) {
  for (std::string path : {"/assets/nope.js", "/assets/../db.sqlite", "/assets/%2e%2e/db.sqlite",
                           "/assets/", "/assets/pages"}) {
    httplib::Result r = Fetch(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << path;
  }
  EXPECT_EQ(FindConsoleAsset("../index.html"), nullptr);
  EXPECT_EQ(ConsoleContentType("logo.svg"), "image/svg+xml");
  EXPECT_EQ(ConsoleContentType("LICENSE"), "application/octet-stream");
}

TEST_F(ConsoleTest, MeNamesTheUserAndWhatTheyMayDo) {
  Reply me = Call("GET", "/api/v1/me", "", Bearer(token_));
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.body["email"], "owner@acme.example");
  ASSERT_EQ(me.body["organizations"].size(), 1u);
  EXPECT_EQ(me.body["organizations"][0]["can_register_compute"], true);
  EXPECT_EQ(me.body["organizations"][0]["can_manage_compute"], true);
}

TEST_F(ConsoleTest, InstallTemplatesAreFilledInForTheCompute) {
  std::string compute = NewCompute(token_);
  Reply r =
      Call("GET", "/api/v1/computes/" + compute + "/install-templates?shared_prefix=/srv/it%27s",
           "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  std::string script = r.body["install_script"];
  EXPECT_THAT(script, HasSubstr("shared_prefix='/srv/it'\\''s'"));
  EXPECT_THAT(script, HasSubstr("control_plane='http://127.0.0.1:1'"));
  EXPECT_THAT(script, HasSubstr("daemon_version='0.1.0'"));
  EXPECT_THAT(script, Not(HasSubstr("exp_it_")));
  EXPECT_THAT(r.body["assistant_prompt"].get<std::string>(), HasSubstr("/srv/it"));
  EXPECT_EQ(r.body["compute_id"], compute);
}

TEST_F(ConsoleTest, InstallTemplatesRefuseABadPrefixAndOtherOrganisations) {
  std::string compute = NewCompute(token_);
  for (std::string prefix : {"", "relative/path", "/a/../b", "/a%0Ab"}) {
    Reply r =
        Call("GET", "/api/v1/computes/" + compute + "/install-templates?shared_prefix=" + prefix,
             "", Bearer(token_));
    EXPECT_EQ(r.status, 400) << prefix;
    EXPECT_EQ(Code(r), "invalid_template_value") << prefix << " " << r.body;
    EXPECT_THAT(r.body["error"].value("message", ""), HasSubstr("shared")) << prefix;
  }
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok());
  Reply r = Call("GET", "/api/v1/computes/" + compute + "/install-templates?shared_prefix=/srv/x",
                 "", Bearer(other->api_token));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(
      Call("GET", "/api/v1/computes/" + compute + "/install-templates?shared_prefix=/srv/x").status,
      401);
}

}  // namespace
}  // namespace api_console_test
}  // namespace expanse::server
