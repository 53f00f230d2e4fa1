// Where the report commands find their settings and their token, and the exit statuses.
#include "report/report_settings.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::report {
namespace report_settings_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EnvLookup Env(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end())
      return std::nullopt;
    return it->second;
  };
}

TEST(ResolveConnectionTest, FlagsWinOverTheEnvironment) {
  ConnectionFlags flags;
  flags.compute = "cmp_flag";
  Result<Connection> c = ResolveConnection(flags,
                                           Env({{"EXPANSE_SERVER", "https://expanse.example/"},
                                                {"EXPANSE_COMPUTE", "cmp_env"},
                                                {"EXPANSE_ORG", "acme"},
                                                {"SSL_CERT_FILE", "/etc/ca.pem"}}),
                                           true, true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server_url, "https://expanse.example");
  EXPECT_EQ(c->compute, "cmp_flag");
  EXPECT_EQ(c->org, "acme");
  EXPECT_EQ(c->ca_file, "/etc/ca.pem");
}

TEST(ResolveConnectionTest, OneErrorNamesEverythingMissing) {
  Result<Connection> c = ResolveConnection({}, Env({}), true, true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ExitCodeFor(c.status()), kExitUsage);
  EXPECT_EQ(c.status().message(),
            "missing the server URL (--server or EXPANSE_SERVER), the organisation (--org or "
            "EXPANSE_ORG) and the compute id (--compute or EXPANSE_COMPUTE)");
  c = ResolveConnection({}, Env({{"EXPANSE_SERVER", "https://x"}}), false, true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "missing the compute id (--compute or EXPANSE_COMPUTE)");
}

TEST(ResolveConnectionTest, PlainHttpOnlyToLoopback) {
  ConnectionFlags flags;
  flags.server = "http://expanse.example:8443";
  flags.compute = "cmp_a";
  Result<Connection> c = ResolveConnection(flags, Env({}), false, true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ExitCodeFor(c.status()), kExitUsage);
  EXPECT_THAT(c.status().message(), HasSubstr("use https://"));
  flags.server = "http://127.0.0.1:8080";
  EXPECT_TRUE(ResolveConnection(flags, Env({}), false, true).ok());
  flags.server = "ftp://expanse.example";
  EXPECT_FALSE(ResolveConnection(flags, Env({}), false, true).ok());
}

TEST(CheckJobIdTest, SlurmsFormsOnly) {
  for (const char* id : {"123", "123_4", "9999999"})
    EXPECT_TRUE(CheckJobId(id).ok()) << id;
  for (const char* id : {"", "abc", "123_", "_4", "123_4_5", "12 3", "../77", "123+1", "1_[2-3]"}) {
    const Status s = CheckJobId(id);
    EXPECT_EQ(ExitCodeFor(s), kExitUsage) << id;
  }
}

TEST(ApiTokenTest, TheVariableIsTakenOutOfTheEnvironment) {
  setenv(kApiTokenVariable, "exp_at_0123456789abcdef", 1);
  std::optional<ApiToken> token = TakeApiTokenFromEnvironment();
  ASSERT_TRUE(token.has_value());
  EXPECT_EQ(token->view(), "exp_at_0123456789abcdef");
  EXPECT_EQ(std::getenv(kApiTokenVariable), nullptr) << "children must not inherit it";
  Result<ApiToken> obtained = ObtainApiToken(std::move(token), "");
  ASSERT_TRUE(obtained.ok()) << obtained.status();
  EXPECT_EQ(obtained->view(), "exp_at_0123456789abcdef");
}

TEST(ApiTokenTest, AMisshapenTokenIsRefusedWithoutBeingPrinted) {
  Result<ApiToken> t = ObtainApiToken(ApiToken("Bearer exp_at_secret"), "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(ExitCodeFor(t.status()), kExitUsage);
  EXPECT_THAT(t.status().message(), Not(HasSubstr("secret")));
  t = ObtainApiToken(std::nullopt, "");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("EXPANSE_API_TOKEN"));
  EXPECT_THAT(t.status().message(), HasSubstr("--token-file"));
}

TEST(ApiTokenTest, TheTokenFileMustBeReadableByItsOwnerOnly) {
  expanse::testing::TempDir dir;
  const std::string path = dir.path() + "/token";
  std::ofstream(path) << "exp_at_from-the-file\n";
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  Result<ApiToken> t = ObtainApiToken(ApiToken("exp_at_from-env"), path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(ExitCodeFor(t.status()), kExitUsage);
  EXPECT_THAT(t.status().message(), HasSubstr("can be read by others (mode 0644)"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("from-the-file")));

  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  t = ObtainApiToken(ApiToken("exp_at_from-env"), path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->view(), "exp_at_from-the-file") << "the file, trailing newline dropped";

  std::ofstream(path) << "exp_at_a\nexp_at_b\n";
  t = ObtainApiToken(std::nullopt, path);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("does not hold an API token"));

  EXPECT_FALSE(ObtainApiToken(std::nullopt, dir.path()).ok()) << "a directory";
  EXPECT_FALSE(ObtainApiToken(std::nullopt, dir.path() + "/absent").ok());
}

TEST(ExitCodeTest, EachFailureHasItsStatus) {
  EXPECT_EQ(ExitCodeFor(OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(UsageError("x")), kExitUsage);
  EXPECT_EQ(ExitCodeFor(NotFoundError("x")), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(UnauthenticatedError("x")), kExitAuth);
  EXPECT_EQ(ExitCodeFor(PermissionDeniedError("x")), kExitAuth);
  EXPECT_EQ(ExitCodeFor(UnavailableError("x")), kExitUnreachable);
  EXPECT_EQ(ExitCodeFor(DeadlineExceededError("x")), kExitUnreachable);
  EXPECT_EQ(ExitCodeFor(DataLossError("x")), kExitFailed);
}

}  // namespace
}  // namespace report_settings_test
}  // namespace expanse::report
