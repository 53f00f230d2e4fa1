#include "release/trusted_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crypto/ecdsa.h"
#include "release/embedded_key.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace trusted_key_test {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

TEST(TrustedKeyTest, TheFirstPinnedKeyThatExistsWins) {
  TempDir dir;
  const crypto::SigningKeyPair site = crypto::GenerateSigningKey().value();
  WriteFile(dir / "b/release.pub", site.public_key_pem);
  Result<TrustedKey> key =
      FirstTrustedKey({dir / "a/release.pub", dir / "b/release.pub", dir / "c/release.pub"});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->pem, site.public_key_pem);
  EXPECT_EQ(key->source, dir / "b/release.pub");
}

TEST(TrustedKeyTest, WithoutAPinnedKeyTheEmbeddedOneIsTrusted) {
  TempDir dir;
  Result<TrustedKey> key = FirstTrustedKey({dir / "missing.pub"});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->pem, EmbeddedReleasePublicKey());
  EXPECT_EQ(key->source, "the embedded release key");
}

// A pin that is broken is an error, not a reason to trust another key.
TEST(TrustedKeyTest, ABrokenPinIsRefusedNotSkipped) {
  TempDir dir;
  WriteFile(dir / "release.pub",
            "-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n");
  Result<TrustedKey> key = FirstTrustedKey({dir / "release.pub"});
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().reason(), "key_invalid");
  EXPECT_THAT(key.status().message(), HasSubstr(dir / "release.pub"));
  // A directory where the file should be cannot be read.
  std::filesystem::create_directories(dir / "dir.pub");
  EXPECT_EQ(FirstTrustedKey({dir / "dir.pub"}).status().reason(), "key_invalid");
}

TEST(TrustedKeyTest, PinsAreLookedForBesideTheProgramThenInEtc) {
  const std::vector<std::string> paths = PinnedKeyPaths();
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_THAT(paths[0], ::testing::EndsWith("/../etc/expanse/release.pub"));
  EXPECT_EQ(paths[1], "/etc/expanse/release.pub");
}

}  // namespace
}  // namespace trusted_key_test
}  // namespace expanse::release
