#include "crypto/random.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::crypto {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

TEST(RandomBytesTest, ReturnsRequestedLength) {
  EXPECT_EQ(RandomBytes(0), "");
  EXPECT_EQ(RandomBytes(1).size(), 1u);
  EXPECT_EQ(RandomBytes(64).size(), 64u);
}

TEST(RandomBytesTest, DoesNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(seen.insert(RandomBytes(16)).second);
  }
}

// RFC 4648 section 10 test vectors, in the URL-safe alphabet without padding.
TEST(Base64UrlTest, EncodesRfc4648Vectors) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("foob"), "Zm9vYg");
  EXPECT_EQ(Base64UrlEncode("fooba"), "Zm9vYmE");
  EXPECT_EQ(Base64UrlEncode("foobar"), "Zm9vYmFy");
}

TEST(Base64UrlTest, UsesUrlSafeAlphabet) {
  EXPECT_EQ(Base64UrlEncode("\xfb\xff\xbf"), "-_-_");
  const Result<std::string> decoded = Base64UrlDecode("-_-_");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, "\xfb\xff\xbf");
}

TEST(Base64UrlTest, RoundTripsEveryLength) {
  for (size_t n = 0; n < 70; ++n) {
    const std::string bytes = RandomBytes(n);
    const Result<std::string> decoded = Base64UrlDecode(Base64UrlEncode(bytes));
    ASSERT_TRUE(decoded.ok()) << "n=" << n << ": " << decoded.status();
    EXPECT_EQ(*decoded, bytes) << "n=" << n;
  }
}

TEST(Base64UrlTest, RoundTripsAllByteValues) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) {
    bytes.push_back(static_cast<char>(i));
  }
  const Result<std::string> decoded = Base64UrlDecode(Base64UrlEncode(bytes));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, bytes);
}

TEST(Base64UrlTest, RejectsMalformedText) {
  for (const std::string_view bad : {
           "Zg==",       // padding
           "Zm9v YmFy",  // whitespace
           "Zm9v\n",     // trailing newline
           "Zm+v",       // standard alphabet
           "Zm/v",       // standard alphabet
           "Z",          // a length no encoding has
           "Zh",         // non-zero unused bits ("Zg" is the canonical form)
           "Zm9vYmF!",   // punctuation
       }) {
    const Result<std::string> decoded = Base64UrlDecode(bad);
    ASSERT_FALSE(decoded.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr("invalid base64url text"));
  }
}

TEST(Base64UrlTest, ErrorDoesNotEchoInput) {
  const Result<std::string> decoded = Base64UrlDecode("secret-value!");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "invalid base64url text (13 characters): expected only A-Z a-z 0-9 - _ without "
            "padding");
}

TEST(NewSecretTokenTest, IsPrefixPlusEncodedRandomBytes) {
  const std::string token = NewSecretToken("exp_it_", 24);
  EXPECT_THAT(token, StartsWith("exp_it_"));
  EXPECT_THAT(token, MatchesRegex("exp_it_[A-Za-z0-9_-]{32}"));
  const Result<std::string> bytes = Base64UrlDecode(token.substr(7));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), 24u);
}

TEST(NewSecretTokenTest, TokensDiffer) {
  EXPECT_NE(NewSecretToken("exp_", 16), NewSecretToken("exp_", 16));
}

}  // namespace
}  // namespace expanse::crypto
