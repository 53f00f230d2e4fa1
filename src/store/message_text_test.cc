#include "store/message_text.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::store::store_internal {
namespace message_text_test {
namespace {

TEST(QuoteForMessageTest, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(QuoteForMessage("acme"), "\"acme\"");
  EXPECT_EQ(QuoteForMessage(""), "\"\"");
  EXPECT_EQ(QuoteForMessage("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(QuoteForMessage("\n\x1B[31m"), "\"\\x0A\\x1B[31m\"");
  EXPECT_EQ(QuoteForMessage("caf\xC3\xA9"), "\"caf\\xC3\\xA9\"");
}

TEST(QuoteForMessageTest, CutsLongText) {
  EXPECT_EQ(QuoteForMessage(std::string(100, 'x')), "\"" + std::string(80, 'x') + "...\"");
}

TEST(IdForMessageTest, PlainIdsStayBareOthersAreQuoted) {
  EXPECT_EQ(IdForMessage("cmp_4f2a-x.y:z"), "cmp_4f2a-x.y:z");
  EXPECT_EQ(IdForMessage(""), "\"\"");
  EXPECT_EQ(IdForMessage("cmp a"), "\"cmp a\"");
  EXPECT_EQ(IdForMessage("cmp'; --"), "\"cmp'; --\"");
  EXPECT_EQ(IdForMessage(std::string(65, 'a')), "\"" + std::string(65, 'a') + "\"");
}

TEST(FormatUtcMillisTest, WritesIso8601Utc) {
  EXPECT_EQ(FormatUtcMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatUtcMillis(1'700'000'000'000), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(FormatUtcMillis(1'700'000'000'250), "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(FormatUtcMillis(-1), "1969-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace message_text_test
}  // namespace expanse::store::store_internal
