#include "deploy/daemon_config.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::deploy {
namespace daemon_config_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

DaemonConfig Sample() {
  DaemonConfig c;
  c.compute_id = "cmp_123";
  c.organization = "acme";
  c.credential_id = "cred_9";
  c.credential = "exp_cc_secretsecret";
  c.control_plane_url = "https://cp.example";
  c.data_plane_url = "https://dp.example";
  c.shared_prefix = "/srv/expanse";
  return c;
}

class DaemonConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-config-XXXXXX";
    dir_ = mkdtemp(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DaemonConfigTest, SaveAndLoadRoundTrip) {
  const std::string path = dir_ + "/config.json";
  ASSERT_TRUE(SaveDaemonConfig(RealHost::Get(), path, Sample(), getuid(), getgid()).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto loaded = LoadDaemonConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->compute_id, "cmp_123");
  EXPECT_EQ(loaded->credential, "exp_cc_secretsecret");
  EXPECT_EQ(loaded->data_plane_url, "https://dp.example");
  EXPECT_EQ(loaded->shared_prefix, "/srv/expanse");
  EXPECT_EQ(loaded->daemon_user, "slurm");
}

TEST_F(DaemonConfigTest, SaveSetsTheOwner) {
  const std::string path = dir_ + "/config.json";
  ASSERT_TRUE(SaveDaemonConfig(RealHost::Get(), path, Sample(), 12345, 23456).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  EXPECT_EQ(st.st_gid, 23456u);
}

TEST_F(DaemonConfigTest, RefusesLooseModes) {
  const std::string path = dir_ + "/config.json";
  ASSERT_TRUE(SaveDaemonConfig(RealHost::Get(), path, Sample(), getuid(), getgid()).ok());
  chmod(path.c_str(), 0644);
  auto loaded = LoadDaemonConfig(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().reason(), "config_permissions");
  EXPECT_THAT(loaded.status().message(), HasSubstr("0644"));
  EXPECT_THAT(loaded.status().message(), Not(HasSubstr("secret")));
}

TEST_F(DaemonConfigTest, RefusesTheSharedMount) {
  DaemonConfig c = Sample();
  c.shared_prefix = dir_;
  auto saved = SaveDaemonConfig(RealHost::Get(), dir_ + "/config.json", c, getuid(), getgid());
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.reason(), "config_on_shared_mount");
  // A file someone put there anyway is refused on load too.
  const std::string path = dir_ + "/config.json";
  std::ofstream(path) << RenderDaemonConfig(c);
  chmod(path.c_str(), 0600);
  auto loaded = LoadDaemonConfig(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().reason(), "config_on_shared_mount");
}

TEST_F(DaemonConfigTest, ParseErrorsNameTheFieldNotTheSecret) {
  auto missing = ParseDaemonConfig(R"({"version":1,"compute_id":"c"})");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("config.credential"));
  auto wrong = ParseDaemonConfig(
      R"({"version":1,"compute_id":"c","credential":"exp_it_tokenvalue","control_plane_url":"https://a","data_plane_url":"https://b"})");
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("exp_cc_"));
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr("tokenvalue")));
  auto url = ParseDaemonConfig(
      R"({"version":1,"compute_id":"c","credential":"exp_cc_x","control_plane_url":"ftp://a","data_plane_url":"https://b"})");
  ASSERT_FALSE(url.ok());
  EXPECT_THAT(url.status().message(), HasSubstr("config.control_plane_url"));
  EXPECT_FALSE(ParseDaemonConfig("[]").ok());
  EXPECT_FALSE(ParseDaemonConfig(R"({"version":2})").ok());
}

// Each of these members, wrongly typed, made nlohmann's value() throw and ended the daemon at
// start; now each is a refusal naming the member.
TEST(ParseDaemonConfigTest, WronglyTypedMembersAreRefusedByName) {
  const std::string base =
      R"("version":1,"compute_id":"c","credential":"exp_cc_x","control_plane_url":"https://a",)"
      R"("data_plane_url":"https://b")";
  for (const auto& [member, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("organization":5)", "config.organization must be a string"},
           {R"("credential_id":[])", "config.credential_id must be a string"},
           {R"("shared_prefix":{})", "config.shared_prefix must be a string"},
           {R"("daemon_user":true)", "config.daemon_user must be a string"},
           {R"("written_ms":"soon")", "config.written_ms must be an integer from 0 to"},
           {R"("written_ms":1.5)", "config.written_ms must be an integer from 0 to"},
           {R"("shared_prefix":"srv/x")", "config.shared_prefix \"srv/x\" is not an absolute"},
       }) {
    Result<DaemonConfig> config = ParseDaemonConfig("{" + base + "," + member + "}");
    ASSERT_FALSE(config.ok()) << member;
    EXPECT_THAT(config.status().message(), HasSubstr(expected)) << member;
    EXPECT_EQ(config.status().reason(), "invalid_config") << member;
  }
  Result<DaemonConfig> version = ParseDaemonConfig(R"({"version":"1"})");
  EXPECT_EQ(version.status().message(), R"(config.version is "1"; this build reads version 1)");
  EXPECT_EQ(version.status().reason(), "invalid_config");
  EXPECT_TRUE(ParseDaemonConfig("{" + base + "}").ok());
}

TEST(ParseDaemonConfigTest, PlainHttpOnlyToLoopback) {
  auto with_url = [](const std::string& url) {
    return ParseDaemonConfig(R"({"version":1,"compute_id":"c","credential":"exp_cc_x",)"
                             R"("control_plane_url":")" +
                             url + R"(","data_plane_url":"https://b"})");
  };
  EXPECT_TRUE(with_url("http://127.0.0.1:8080").ok());
  EXPECT_TRUE(with_url("http://[::1]:8080/").ok());
  Result<DaemonConfig> remote = with_url("http://expanse.example");
  ASSERT_FALSE(remote.ok());
  EXPECT_THAT(remote.status().message(),
              HasSubstr(R"(config.control_plane_url "http://expanse.example" must use https://)"));
  EXPECT_EQ(remote.status().reason(), "invalid_config");
}

TEST(ParseDaemonConfigTest, NestingBombIsRefusedNotBuilt) {
  Result<DaemonConfig> config = ParseDaemonConfig(std::string(100'000, '['));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config: "));
  EXPECT_EQ(config.status().reason(), "invalid_config");
}

TEST(PathIsUnderTest, ComparesComponents) {
  EXPECT_TRUE(PathIsUnder("/srv/expanse/etc/config.json", "/srv/expanse"));
  EXPECT_TRUE(PathIsUnder("/srv/expanse", "/srv/expanse/"));
  EXPECT_TRUE(PathIsUnder("/srv/expanse/../expanse/x", "/srv/expanse"));
  EXPECT_FALSE(PathIsUnder("/srv/expanse2/config.json", "/srv/expanse"));
  EXPECT_FALSE(PathIsUnder("/var/lib/slurm/.expanse/config.json", "/srv/expanse"));
  EXPECT_FALSE(PathIsUnder("/anything", ""));
}

}  // namespace
}  // namespace daemon_config_test
}  // namespace expanse::deploy
