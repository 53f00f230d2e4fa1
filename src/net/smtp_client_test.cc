#include "net/smtp_client.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kNow = 1'796'300'000'000;  // 2026-12-03T12:13:20Z, a Thursday

MailMessage Mail() {
  return {.from = "alerts@expanse.example.org",
          .to = {"ana@example.org", "ops@example.org"},
          .subject = "[Expanse] job 42 stuck",
          .text = "line one\nline two\r\n.starts with a dot"};
}

TEST(CheckMailAddressTest, AcceptsPlainAddressesOnly) {
  EXPECT_TRUE(CheckMailAddress("ana@example.org").ok());
  EXPECT_TRUE(CheckMailAddress("first.last+tag@sub.example.org").ok());
  for (const char* bad : {"", "ana", "@example.org", "ana@", "a@b@c", "ana @example.org",
                          "ana@example.org\r\nBcc: x@evil.example", "<ana@example.org>",
                          "ana@example.org,bob@example.org", "\"ana\"@example.org"}) {
    const Status s = CheckMailAddress(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.reason(), "invalid_address") << bad;
  }
  EXPECT_FALSE(CheckMailAddress(std::string(250, 'a') + "@b.org").ok());
}

TEST(BuildMailMessageTest, HeadersThenACrlfBody) {
  Result<std::string> text = BuildMailMessage(Mail(), kNow);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Date: Thu, 03 Dec 2026 12:13:20 +0000\r\n"));
  EXPECT_THAT(*text, HasSubstr("From: alerts@expanse.example.org\r\n"));
  EXPECT_THAT(*text, HasSubstr("To: ana@example.org, ops@example.org\r\n"));
  EXPECT_THAT(*text, HasSubstr("Subject: [Expanse] job 42 stuck\r\n"));
  EXPECT_THAT(*text, HasSubstr("@expanse.example.org>\r\nMIME-Version: 1.0\r\n"));
  EXPECT_THAT(*text, HasSubstr("Content-Type: text/plain; charset=utf-8\r\n"));
  EXPECT_THAT(*text, HasSubstr("\r\n\r\nline one\r\nline two\r\n.starts with a dot\r\n"));
  EXPECT_THAT(*text, Not(HasSubstr("two\r\r")));
  // Two messages never share a Message-ID.
  Result<std::string> again = BuildMailMessage(Mail(), kNow);
  const auto id = [](const std::string& m) {
    const size_t at = m.find("Message-ID:");
    return m.substr(at, m.find("\r\n", at) - at);
  };
  EXPECT_NE(id(*text), id(*again));
}

TEST(BuildMailMessageTest, EncodesANonAsciiSubject) {
  MailMessage m = Mail();
  m.subject = "Tâche 42 bloquée depuis 17 min — GPU inactif sur nœud gpu-ä-01 (über lange Zeit)";
  Result<std::string> text = BuildMailMessage(m, kNow);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Subject: =?UTF-8?B?"));
  EXPECT_THAT(*text, HasSubstr("?=\r\n =?UTF-8?B?"));  // folded into several encoded words
  EXPECT_THAT(*text, Not(HasSubstr("bloquée")));
}

TEST(BuildMailMessageTest, RefusesInjection) {
  MailMessage m = Mail();
  m.subject = "hi\r\nBcc: victim@example.org";
  EXPECT_EQ(BuildMailMessage(m, kNow).status().reason(), "invalid_subject");
  m = Mail();
  m.to = {};
  EXPECT_EQ(BuildMailMessage(m, kNow).status().code(), StatusCode::kInvalidArgument);
  m = Mail();
  m.to.push_back("x@example.org\nRCPT TO:<y@example.org>");
  EXPECT_EQ(BuildMailMessage(m, kNow).status().reason(), "invalid_address");
}

TEST(SmtpClientTest, RefusesUrlsThatAreNotSmtp) {
  for (const char* url : {"http://mail.example.org", "smtp://", "smtp://user:pw@mail.example.org",
                          "mail.example.org:25", ""}) {
    SmtpOptions options;
    options.url = url;
    auto client = SmtpClient::Create(options);
    ASSERT_FALSE(client.ok()) << url;
    EXPECT_EQ(client.status().reason(), "invalid_url") << url;
  }
  SmtpOptions options;
  options.url = "smtp://127.0.0.1:25";
  options.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(SmtpClient::Create(options).status().reason(), "ca_file_unreadable");
  options.url = "smtps://mail.example.org:465";
  options.ca_file = "";
  EXPECT_TRUE(SmtpClient::Create(options).ok());
}

TEST(SmtpClientTest, NothingListeningIsUnavailable) {
  // Port 1 on loopback: nothing listens there, the connection is refused at once.
  SmtpOptions options;
  options.url = "smtp://127.0.0.1:1";
  auto client = SmtpClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const Status sent = (*client)->Send(Mail(), kNow);
  EXPECT_EQ(sent.code(), StatusCode::kUnavailable) << sent;
  EXPECT_EQ(sent.reason(), "network_error");
  EXPECT_THAT(sent.message(), HasSubstr("smtp://127.0.0.1:1"));
  EXPECT_EQ((*client)
                ->Send({.from = "bad", .to = {"a@b.org"}, .subject = "s", .text = "t"}, kNow)
                .reason(),
            "invalid_address");
}

}  // namespace
}  // namespace expanse::net
