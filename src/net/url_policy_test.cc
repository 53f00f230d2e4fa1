#include "net/url_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::net {
namespace {

using ::testing::HasSubstr;

TEST(UrlPolicyTest, HttpsAnywhereHttpOnlyToLoopback) {
  for (const char* url : {"https://dp.example.com/dp/v1/ingest", "https://10.0.0.5:8443/",
                          "http://127.0.0.1:8080/dp/v1/ingest", "http://localhost/x",
                          "http://[::1]:9/x", "HTTPS://DP.EXAMPLE.COM/"}) {
    EXPECT_TRUE(CheckUrlAllowed(url).ok()) << url << ": " << CheckUrlAllowed(url);
  }
}

TEST(UrlPolicyTest, PlainHttpOffLoopbackIsInsecure) {
  for (const char* url : {"http://dp.example.com/dp/v1/ingest", "http://10.0.0.5:8080/",
                          "http://127.0.0.1.nip.io/", "http://[::2]/"}) {
    Status status = CheckUrlAllowed(url);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << url;
    EXPECT_EQ(status.reason(), "insecure_url") << url;
  }
  EXPECT_THAT(CheckUrlAllowed("http://dp.example.com/").message(),
              HasSubstr("refusing plain http to \"dp.example.com\""));
}

TEST(UrlPolicyTest, ParserTricksCannotHideTheRealHost) {
  // libcurl connects to evil.example here; the check must see the same host.
  EXPECT_EQ(CheckUrlAllowed("http://127.0.0.1@evil.example/").reason(), "invalid_url");
  EXPECT_EQ(CheckUrlAllowed("http://evil.example#@127.0.0.1/").reason(), "insecure_url");
  UrlParts parts;
  ASSERT_TRUE(SplitUrl("http://evil.example?@127.0.0.1/", &parts).ok());
  EXPECT_EQ(parts.host, "evil.example");
}

TEST(UrlPolicyTest, CredentialsInAProxyUrlAreRedacted) {
  EXPECT_EQ(RedactUrlCredentials("http://ana:s3cret@proxy.example:3128"),
            "http://***@proxy.example:3128/");
  EXPECT_EQ(RedactUrlCredentials("ana:s3cret@proxy.example:3128"),
            "http://***@proxy.example:3128/");
  EXPECT_EQ(RedactUrlCredentials("http://proxy.example:3128"), "http://proxy.example:3128");
  EXPECT_EQ(RedactUrlCredentials(""), "");
  const std::string odd = RedactUrlCredentials("::ana:s3cret@@proxy");
  EXPECT_EQ(odd.find("s3cret"), std::string::npos) << odd;
  for (const char* cut : {"/", "?", "#"}) {
    const std::string url = std::string("http://svc:2024") + cut + "Secret@proxy:3128";
    EXPECT_EQ(RedactUrlCredentials(url), "***@proxy:3128") << url;
  }
}

TEST(UrlPolicyTest, OtherSchemesAndNonUrls) {
  EXPECT_EQ(CheckUrlAllowed("ftp://127.0.0.1/").reason(), "unsupported_url");
  EXPECT_EQ(CheckUrlAllowed("file:///etc/passwd").reason(), "invalid_url");
  EXPECT_EQ(CheckUrlAllowed("dp.example.com/ingest").reason(), "invalid_url");
  EXPECT_EQ(CheckUrlAllowed("").reason(), "invalid_url");
  EXPECT_EQ(CheckUrlAllowed("https://user:secret@dp.example.com/").reason(), "invalid_url");
  EXPECT_EQ(CheckUrlAllowed(std::string_view("https://a\0b/", 12)).reason(), "invalid_url");
}

}  // namespace
}  // namespace expanse::net
