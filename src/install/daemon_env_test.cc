#include "install/daemon_env.h"

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::install {
namespace daemon_env_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

SeedValues Network(std::optional<std::string> proxy, std::optional<std::string> no_proxy,
                   std::optional<std::string> ca) {
  SeedValues values;
  values.network.https_proxy = std::move(proxy);
  values.network.no_proxy = std::move(no_proxy);
  values.network.ssl_cert_file = std::move(ca);
  return values;
}

std::string Seed(std::string_view existing, const SeedValues& values) {
  Result<std::string> seeded = SeedDaemonEnv(existing, values);
  if (!seeded.ok())
    return "<error> " + seeded.status().ToString();
  return *seeded;
}

Status SeedError(std::string_view existing, const SeedValues& values) {
  Result<std::string> seeded = SeedDaemonEnv(existing, values);
  if (seeded.ok())
    return InternalError("seeded without error");
  return seeded.status();
}

// --- NetworkSettingsFromEnvironment ------------------------------------------

TEST(NetworkSettingsFromEnvironmentTest, ReadsUpperCase) {
  const NetworkSettings s = NetworkSettingsFromEnvironment(
      {{"HTTPS_PROXY", "http://proxy:3128"}, {"NO_PROXY", ".internal"}, {"SSL_CERT_FILE", "/ca"}});
  EXPECT_EQ(s.https_proxy, "http://proxy:3128");
  EXPECT_EQ(s.no_proxy, ".internal");
  EXPECT_EQ(s.ssl_cert_file, "/ca");
}

TEST(NetworkSettingsFromEnvironmentTest, LowerCaseIsHonouredAndWinsLikeInLibcurl) {
  NetworkSettings s =
      NetworkSettingsFromEnvironment({{"https_proxy", "http://lower:1"}, {"no_proxy", "lo"}});
  EXPECT_EQ(s.https_proxy, "http://lower:1");
  EXPECT_EQ(s.no_proxy, "lo");
  s = NetworkSettingsFromEnvironment(
      {{"https_proxy", "http://lower:1"}, {"HTTPS_PROXY", "http://upper:2"}});
  EXPECT_EQ(s.https_proxy, "http://lower:1");
}

TEST(NetworkSettingsFromEnvironmentTest, EmptyAndMissingAreUnset) {
  const NetworkSettings s = NetworkSettingsFromEnvironment(
      {{"https_proxy", ""}, {"HTTPS_PROXY", "http://upper:2"}, {"SSL_CERT_FILE", ""}});
  EXPECT_EQ(s.https_proxy, "http://upper:2");  // an empty lower-case entry does not hide it
  EXPECT_EQ(s.no_proxy, std::nullopt);
  EXPECT_EQ(s.ssl_cert_file, std::nullopt);
  // Lower-case ssl_cert_file is not a name OpenSSL or libcurl reads.
  EXPECT_EQ(NetworkSettingsFromEnvironment({{"ssl_cert_file", "/ca"}}).ssl_cert_file, std::nullopt);
}

// --- SeedDaemonEnv --------------------------------------------------------------

TEST(SeedDaemonEnvTest, NewFileGetsAHeaderAndTheSettings) {
  const std::string text =
      Seed("", Network("http://proxy:3128", "localhost,.internal", "/etc/ca.pem"));
  EXPECT_THAT(text, StartsWith("# Runtime settings for this node's Expanse service"));
  EXPECT_THAT(text, HasSubstr("\nHTTPS_PROXY=http://proxy:3128\nNO_PROXY=localhost,.internal\n"
                              "SSL_CERT_FILE=/etc/ca.pem\n"));
  const Result<EnvFile> parsed = ParseEnvFile(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 3u);
}

TEST(SeedDaemonEnvTest, KeepsTheOperatorsLinesByteForByte) {
  const std::string existing =
      "# site settings\n"
      "EXPANSE_DCGM_HOST = 127.0.0.1:5555\n"
      "\n"
      "; relay for the air-gapped rack\n"
      "EXPANSE_SEGMENT_UPLOAD_MODE='relay'\n"
      "HTTPS_PROXY=\"http://old:3128\"\n";
  const std::string text = Seed(existing, Network("http://new:3128", std::nullopt, std::nullopt));
  EXPECT_EQ(text,
            "# site settings\n"
            "EXPANSE_DCGM_HOST = 127.0.0.1:5555\n"
            "\n"
            "; relay for the air-gapped rack\n"
            "EXPANSE_SEGMENT_UPLOAD_MODE='relay'\n"
            "HTTPS_PROXY=http://new:3128\n");
}

TEST(SeedDaemonEnvTest, UnsetSettingsLeaveTheFileAlone) {
  const std::string existing = "NO_PROXY=.cluster\nSSL_CERT_FILE=/etc/ca.pem\n";
  EXPECT_EQ(Seed(existing, SeedValues{}), existing);
}

TEST(SeedDaemonEnvTest, SeedingTwiceChangesNothing) {
  const SeedValues values = Network("http://p:1", "a b", "/ca");
  const std::string once = Seed("X=1\n", values);
  EXPECT_EQ(Seed(once, values), once);
}

TEST(SeedDaemonEnvTest, LowerCaseProxyKeysInTheFileAreUpdatedToo) {
  const std::string text = Seed("https_proxy=http://stale:1\nno_proxy=old\n",
                                Network("http://new:2", "new", std::nullopt));
  EXPECT_EQ(text,
            "https_proxy=http://new:2\nno_proxy=new\n"
            "HTTPS_PROXY=http://new:2\nNO_PROXY=new\n");
}

TEST(SeedDaemonEnvTest, WritesRuntimeSettingsInOrder) {
  SeedValues values;
  values.runtime_settings = {{"EXPANSE_PROFILING_AGENT_ENABLE", "0"},
                             {"EXPANSE_CUPTI_HELPER", "/srv/expanse/lib/cupti nodes/helper"}};
  EXPECT_EQ(Seed("A=1\n", values),
            "A=1\nEXPANSE_PROFILING_AGENT_ENABLE=0\n"
            "EXPANSE_CUPTI_HELPER=\"/srv/expanse/lib/cupti nodes/helper\"\n");
}

TEST(SeedDaemonEnvTest, RefusesAFileItCannotRead) {
  const Status status = SeedError("FOO\n", Network("http://p:1", std::nullopt, std::nullopt));
  EXPECT_EQ(status.reason(), "env_file_invalid");
  EXPECT_THAT(status.message(), StartsWith("daemon.env: line 1: missing '=' after key \"FOO\""));
  EXPECT_THAT(status.message(), HasSubstr("fix the file by hand"));
}

TEST(SeedDaemonEnvTest, RefusesBadValuesNamingOnlyTheKey) {
  Status status =
      SeedError("", Network("http://user:hunter2@p:1\nX=1", std::nullopt, std::nullopt));
  EXPECT_EQ(status.reason(), "invalid_env_setting");
  EXPECT_EQ(status.message(),
            "the value of HTTPS_PROXY contains a control character (newline, tab, ...)");
  EXPECT_THAT(status.message(), Not(HasSubstr("hunter2")));

  status = SeedError("", Network(std::nullopt, std::nullopt, "certs/ca.pem"));
  EXPECT_EQ(status.reason(), "invalid_env_setting");
  EXPECT_EQ(status.message(), R"(SSL_CERT_FILE "certs/ca.pem" is not an absolute path)");

  SeedValues values;
  values.runtime_settings = {{"BAD-KEY", "1"}};
  EXPECT_THAT(SeedError("", values).message(), HasSubstr("runtime setting key \"BAD-KEY\""));
  values.runtime_settings = {{"https_proxy", "http://p:1"}};
  EXPECT_THAT(SeedError("", values).message(), HasSubstr("https_proxy is a network setting"));
}

TEST(SeedDaemonEnvTest, NeverWritesTheInstallToken) {
  SeedValues values;
  values.runtime_settings = {{"EXPANSE_INSTALL_TOKEN", "exp_it_abc"}};
  Status status = SeedError("", values);
  EXPECT_EQ(status.reason(), "secret_in_env_file");
  EXPECT_THAT(status.message(), Not(HasSubstr("exp_it_abc")));

  status = SeedError("EXPANSE_INSTALL_TOKEN=exp_it_abc\n", SeedValues{});
  EXPECT_EQ(status.reason(), "secret_in_env_file");
  EXPECT_THAT(status.message(), HasSubstr("the existing file sets EXPANSE_INSTALL_TOKEN; remove"));
  EXPECT_THAT(status.message(), Not(HasSubstr("exp_it_abc")));
}

TEST(SeedDaemonEnvTest, NeverWritesAGivenSecret) {
  const std::string token = "exp_it_s3cr$t";
  SeedValues values = Network("http://" + token + "@proxy:1", std::nullopt, std::nullopt);
  values.secrets = {"", token};
  Status status = SeedError("", values);
  EXPECT_EQ(status.reason(), "secret_in_env_file");
  EXPECT_EQ(status.message(),
            "refusing to write daemon.env: the value of HTTPS_PROXY contains a secret; the install "
            "token and credentials are never stored there");

  // Already in the file under another name, escaped as the renderer would write it.
  values = SeedValues{};
  values.secrets = {token};
  status = SeedError("OLD=\"exp_it_s3cr\\$t\"\n", values);
  EXPECT_THAT(status.message(), HasSubstr("the value of OLD contains a secret"));
  // In a comment.
  status = SeedError("# token was " + token + "\n", values);
  EXPECT_THAT(status.message(), HasSubstr("(a comment?) contains a secret"));
  EXPECT_THAT(status.message(), Not(HasSubstr(token)));
  // Empty secrets match nothing.
  values.secrets = {""};
  EXPECT_EQ(Seed("A=1\n", values), "A=1\n");
}

// --- DiffEnvKeys / DescribeEnvKeyChanges ----------------------------------------

TEST(DiffEnvKeysTest, NamesAddedChangedAndRemovedKeys) {
  const Result<EnvKeyChanges> changes =
      DiffEnvKeys("A=1\nB=2\nC=3\n", "# new\nB=2\nA=9\nD=4\nE=5\n");
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_THAT(changes->added, ElementsAre("D", "E"));
  EXPECT_THAT(changes->changed, ElementsAre("A"));
  EXPECT_THAT(changes->removed, ElementsAre("C"));
  EXPECT_EQ(DescribeEnvKeyChanges("/etc/expanse/daemon.env", *changes),
            "/etc/expanse/daemon.env: added D, E; changed A; removed C");
}

TEST(DiffEnvKeysTest, SeedingReportsNamesNotValues) {
  const std::string before = "HTTPS_PROXY=http://old:1\nX=1\n";
  const std::string after =
      Seed(before, Network("http://user:pw@new:1", ".internal", std::nullopt));
  const Result<EnvKeyChanges> changes = DiffEnvKeys(before, after);
  ASSERT_TRUE(changes.ok());
  const std::string line = DescribeEnvKeyChanges("daemon.env", *changes);
  EXPECT_EQ(line, "daemon.env: added NO_PROXY; changed HTTPS_PROXY");
  EXPECT_THAT(line, Not(HasSubstr("pw")));
}

TEST(DiffEnvKeysTest, UnchangedAndUnparsable) {
  const Result<EnvKeyChanges> same = DiffEnvKeys("A=1\n", "A = 1\n");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->empty());
  EXPECT_THAT(same->added, IsEmpty());
  EXPECT_EQ(DescribeEnvKeyChanges("f", *same), "f: unchanged");
  EXPECT_FALSE(DiffEnvKeys("A\n", "A=1\n").ok());
}

}  // namespace
}  // namespace daemon_env_test
}  // namespace expanse::install
