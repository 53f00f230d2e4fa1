#include "crypto/password.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::crypto {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string MustHash(std::string_view password) {
  Result<std::string> hash = HashPassword(password, MinimumCost());
  EXPECT_TRUE(hash.ok()) << hash.status();
  return hash.ok() ? *std::move(hash) : std::string();
}

TEST(PasswordTest, HashIsSelfDescribingArgon2id) {
  const std::string hash = MustHash("correct horse battery staple");
  EXPECT_THAT(hash, StartsWith("$argon2id$v=19$m=8,t=1,p=1$"));
}

TEST(PasswordTest, VerifiesRightPasswordOnly) {
  const std::string hash = MustHash("correct horse battery staple");
  EXPECT_TRUE(VerifyPassword(hash, "correct horse battery staple"));
  EXPECT_FALSE(VerifyPassword(hash, "correct horse battery stapler"));
  EXPECT_FALSE(VerifyPassword(hash, "Correct horse battery staple"));
  EXPECT_FALSE(VerifyPassword(hash, ""));
}

TEST(PasswordTest, SaltsEveryHash) {
  const std::string first = MustHash("pässwörd");
  const std::string second = MustHash("pässwörd");
  EXPECT_NE(first, second);
  EXPECT_TRUE(VerifyPassword(first, "pässwörd"));
  EXPECT_TRUE(VerifyPassword(second, "pässwörd"));
}

TEST(PasswordTest, InteractiveCostHashesAndVerifies) {
  const Result<std::string> hash = HashPassword("hunter2", InteractiveCost());
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_THAT(*hash, StartsWith("$argon2id$v=19$m=65536,t=2,p=1$"));
  EXPECT_TRUE(VerifyPassword(*hash, "hunter2"));
  EXPECT_FALSE(VerifyPassword(*hash, "hunter3"));
}

TEST(PasswordTest, AcceptsLongestAllowedPassword) {
  const std::string password(kMaxPasswordBytes, 'x');
  EXPECT_TRUE(VerifyPassword(MustHash(password), password));
}

TEST(PasswordTest, RejectsBadPasswords) {
  struct Case {
    std::string password;
    std::string message;
  };
  const Case cases[] = {
      {"", "password is empty"},
      {std::string(kMaxPasswordBytes + 1, 'x'),
       "password is 1025 bytes long; at most 1024 bytes are allowed"},
      {"caf\xc3", "password is not valid UTF-8"},
      {"\xff\xfe", "password is not valid UTF-8"},
  };
  for (const Case& c : cases) {
    const Result<std::string> hash = HashPassword(c.password, MinimumCost());
    ASSERT_FALSE(hash.ok());
    EXPECT_EQ(hash.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(hash.status().message(), c.message);
  }
}

TEST(PasswordTest, VerifyRejectsPasswordsHashWouldRefuse) {
  const std::string hash = MustHash("x");
  EXPECT_FALSE(VerifyPassword(hash, std::string(kMaxPasswordBytes + 1, 'x')));
  EXPECT_FALSE(VerifyPassword(hash, "\xff"));
}

TEST(PasswordTest, RejectsCostOutsideLimits) {
  const Result<std::string> hash = HashPassword("x", {0, MinimumCost().mem_bytes});
  ASSERT_FALSE(hash.ok());
  EXPECT_EQ(hash.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(hash.status().message(), HasSubstr("outside libsodium's limits"));
  EXPECT_FALSE(HashPassword("x", {1, 1024}).ok());
}

TEST(PasswordTest, TamperedHashDoesNotVerify) {
  const std::string hash = MustHash("hunter2");
  ASSERT_TRUE(VerifyPassword(hash, "hunter2"));

  std::string flipped_last = hash;
  flipped_last.back() = flipped_last.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(VerifyPassword(flipped_last, "hunter2"));

  std::string other_salt = hash;
  const size_t salt_start = hash.rfind('$', hash.rfind('$') - 1) + 1;
  other_salt[salt_start] = other_salt[salt_start] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(VerifyPassword(other_salt, "hunter2"));

  std::string argon2i = hash;
  argon2i.replace(0, 10, "$argon2i$");
  EXPECT_FALSE(VerifyPassword(argon2i, "hunter2"));

  EXPECT_FALSE(VerifyPassword(hash.substr(0, hash.size() - 4), "hunter2"));
  EXPECT_FALSE(VerifyPassword(hash + "A", "hunter2"));
  EXPECT_FALSE(VerifyPassword(std::string(hash).insert(5, 1, '\0'), "hunter2"));
  EXPECT_FALSE(VerifyPassword("", "hunter2"));
  EXPECT_FALSE(VerifyPassword("not a hash", "hunter2"));
  EXPECT_FALSE(VerifyPassword(std::string(1000, '$'), "hunter2"));
}

}  // namespace
}  // namespace expanse::crypto
