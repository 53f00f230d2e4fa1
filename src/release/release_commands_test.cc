// The release manager's commands end to end in a temporary directory: keygen, pack, sign,
// manifest, verify.
#include "release/release_commands.h"

#include <filesystem>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crypto/ecdsa.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace release_commands_test {
namespace {

using ::testing::HasSubstr;

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(dir_ / "staging/bin/expanse-daemon",
                       "\x7f"
                       "ELF",
                       0755);
    std::filesystem::create_directories(dir_ / "out");
    ASSERT_TRUE(RunKeygen(Keys(), out_).ok());
  }

  KeygenFlags Keys() { return {dir_ / "release.key", dir_ / "release.pub"}; }

  std::string Archive() const { return dir_ / "out/expanse-daemon_1.2.0_linux_amd64.tar.gz"; }

  Status Pack() {
    return RunPack(
        {.version = "1.2.0", .staging_dir = dir_ / "staging", .output_dir = dir_ / "out"}, out_);
  }

  testing::TempDir dir_;
  std::ostringstream out_;
  ManualClock clock_{1'800'000'000'000};
};

TEST_F(CommandsTest, KeygenWritesAPrivateKeyOnlyTheOwnerReadsAndNeverOverwrites) {
  EXPECT_EQ(testing::ModeOf(dir_ / "release.key"), 0600u);
  EXPECT_EQ(testing::ModeOf(dir_ / "release.pub"), 0644u);
  std::string private_pem = testing::ReadFile(dir_ / "release.key");
  EXPECT_EQ(crypto::PublicKeyOf(private_pem).value(), testing::ReadFile(dir_ / "release.pub"));

  Status again = RunKeygen(Keys(), out_);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("release.key already exists"));
  EXPECT_EQ(testing::ReadFile(dir_ / "release.key"), private_pem);

  std::filesystem::remove(dir_ / "release.key");
  EXPECT_EQ(RunKeygen(Keys(), out_).code(), StatusCode::kAlreadyExists);  // the .pub exists
  EXPECT_FALSE(std::filesystem::exists(dir_ / "release.key"));            // nothing half done
}

TEST_F(CommandsTest, PackSignManifestVerify) {
  ASSERT_TRUE(Pack().ok());
  EXPECT_THAT(out_.str(), HasSubstr("wrote " + Archive()));
  ASSERT_TRUE(RunSign({.private_key_path = dir_ / "release.key", .files = {Archive()}}, out_).ok());
  ASSERT_TRUE(std::filesystem::exists(Archive() + ".sig"));

  ASSERT_TRUE(RunManifest({.dir = dir_ / "out",
                           .base_url = "https://releases.example.com/expanse",
                           .private_key_path = dir_ / "release.key"},
                          clock_, out_)
                  .ok())
      << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("1 releases, 1 archives"));
  EXPECT_THAT(out_.str(), HasSubstr("not the embedded release key"));

  std::ostringstream verified;
  ASSERT_TRUE(
      RunVerify({.file = dir_ / "out/manifest.json", .public_key_path = dir_ / "release.pub"},
                verified)
          .ok());
  EXPECT_THAT(verified.str(), HasSubstr("signature OK"));
  EXPECT_THAT(verified.str(), HasSubstr("1 releases (1.2.0)"));
  ASSERT_TRUE(
      RunVerify({.file = Archive(), .public_key_path = dir_ / "release.pub"}, verified).ok());
  EXPECT_THAT(verified.str(), HasSubstr("expanse-daemon 1.2.0 for linux/amd64, 1 files match"));

  // Without --public-key the embedded key is used, which did not sign these.
  EXPECT_EQ(RunVerify({.file = Archive()}, verified).reason(), "signature_mismatch");
}

TEST_F(CommandsTest, VerifyRefusesMissingSignaturesAndTampering) {
  ASSERT_TRUE(Pack().ok());
  Status missing = RunVerify({.file = Archive(), .public_key_path = dir_ / "release.pub"}, out_);
  EXPECT_EQ(missing.reason(), "signature_missing");
  ASSERT_TRUE(RunSign({.private_key_path = dir_ / "release.key", .files = {Archive()}}, out_).ok());
  std::string bytes = testing::ReadFile(Archive());
  bytes[bytes.size() / 2] ^= 1;
  testing::WriteFile(Archive(), bytes);
  EXPECT_EQ(RunVerify({.file = Archive(), .public_key_path = dir_ / "release.pub"}, out_).reason(),
            "signature_mismatch");
}

TEST_F(CommandsTest, ManifestNeedsSignedArchivesAndWarnsAboutReadableKeys) {
  ASSERT_TRUE(Pack().ok());
  ManifestFlags flags{.dir = dir_ / "out",
                      .base_url = "https://releases.example.com",
                      .private_key_path = dir_ / "release.key"};
  EXPECT_EQ(RunManifest(flags, clock_, out_).reason(), "archive_unsigned");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out/manifest.json.sig"));

  std::filesystem::permissions(dir_ / "release.key", std::filesystem::perms(0644));
  ASSERT_TRUE(RunSign({.private_key_path = dir_ / "release.key", .files = {Archive()}}, out_).ok());
  EXPECT_THAT(out_.str(), HasSubstr("can be read by other users"));
  EXPECT_EQ(
      RunSign({.private_key_path = dir_ / "release.pub", .files = {Archive()}}, out_).reason(),
      "key_invalid");
  EXPECT_FALSE(RunPack({.staging_dir = dir_ / "staging"}, out_).ok());  // no version
}

}  // namespace
}  // namespace release_commands_test
}  // namespace expanse::release
