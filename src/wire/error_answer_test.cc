#include "wire/error_answer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

TEST(ErrorAnswerTest, ReadsTheDocumentedShape) {
  const ErrorAnswer a =
      DecodeErrorAnswer(R"({"error":{"code":"credential_revoked","message":"revoked at 12:00"}})");
  EXPECT_EQ(a.code, "credential_revoked");
  EXPECT_EQ(a.message, "revoked at 12:00");
}

TEST(ErrorAnswerTest, AnythingElseGivesEmptyStringsNeverAThrow) {
  for (const std::string& body : std::vector<std::string>{
           "", "<html>502 Bad Gateway</html>", "[]", R"({"error":"oops"})",
           R"({"error":{"code":5}})", R"({"error":{"code":"Not Snake","message":7}})",
           std::string(100'000, '['), R"({"error":{"code":")" + std::string(65, 'a') + R"("}})"}) {
    const ErrorAnswer a = DecodeErrorAnswer(body);
    EXPECT_EQ(a.code, "") << body.substr(0, 80);
    EXPECT_EQ(a.message, "") << body.substr(0, 80);
  }
}

TEST(ErrorAnswerTest, MessagesAreCutToCleanText) {
  const ErrorAnswer long_one =
      DecodeErrorAnswer(R"({"error":{"code":"x","message":")" + std::string(5000, 'm') + R"("}})");
  EXPECT_EQ(long_one.message.size(), 1024u);
  // A cut in the middle of "é" (2 bytes) must not leave half a character.
  const ErrorAnswer cut = DecodeErrorAnswer(R"({"error":{"message":")" + std::string(1023, 'a') +
                                            "\xc3\xa9" + R"("}})");
  EXPECT_EQ(cut.message, std::string(1023, 'a'));
  const ErrorAnswer control = DecodeErrorAnswer(R"({"error":{"message":"line\nbreak"}})");
  EXPECT_EQ(control.message, "line");
}

}  // namespace
}  // namespace expanse::wire
