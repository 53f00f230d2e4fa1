#include "wire/json_parse.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

TEST(ParseJsonTest, ParsesDocumentsWithinTheLimits) {
  Result<nlohmann::json> doc = ParseJson(R"({"a": [1, 2.5, "x", null, true, {"b": -3}]})", {});
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)["a"][5]["b"], -3);
  EXPECT_EQ((*doc)["a"][1], 2.5);
}

TEST(ParseJsonTest, RefusesNestingPastTheDepthAtTheFirstLevelTooMany) {
  JsonLimits limits;
  limits.max_depth = 3;
  EXPECT_TRUE(ParseJson("[[[1]]]", limits).ok());
  Result<nlohmann::json> deep = ParseJson("[[[[1]]]]", limits);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.status().reason(), "json_too_deep");
  EXPECT_EQ(deep.status().message(), "the document nests arrays and objects deeper than 3 levels");
  EXPECT_EQ(ParseJson(R"({"a":{"b":{"c":{}}}})", limits).status().reason(), "json_too_deep");
}

TEST(ParseJsonTest, HundredsOfThousandsOfOpenBracketsAreRefusedNotBuilt) {
  // What crashed the server (a recursive dump of 60,000 levels) and exhausted its memory
  // (a gigabyte for 16 MB of '['): refused at the 33rd level, truncated input or not.
  const std::string bomb(500'000, '[');
  Result<nlohmann::json> doc = ParseJson(bomb, JsonLimits{});
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().reason(), "json_too_deep");
  const std::string closed = std::string(200'000, '[') + std::string(200'000, ']');
  EXPECT_EQ(ParseJson(closed, JsonLimits{}).status().reason(), "json_too_deep");
}

TEST(ParseJsonTest, RefusesTooManyValuesAndLongStrings) {
  JsonLimits limits;
  limits.max_values = 4;
  EXPECT_TRUE(ParseJson("[1,2,3]", limits).ok());  // the array and three numbers
  Result<nlohmann::json> many = ParseJson("[1,2,3,4]", limits);
  EXPECT_EQ(many.status().reason(), "json_too_large");
  EXPECT_EQ(many.status().message(), "the document holds more than 4 values");
  // Keys count too: an object of many small members is as costly as an array.
  EXPECT_EQ(ParseJson(R"({"a":1,"b":2})", limits).status().reason(), "json_too_large");

  JsonLimits strings;
  strings.max_string_bytes = 3;
  EXPECT_TRUE(ParseJson(R"(["abc"])", strings).ok());
  EXPECT_EQ(ParseJson(R"(["abcd"])", strings).status().reason(), "json_too_large");
  EXPECT_EQ(ParseJson(R"({"abcd":1})", strings).status().reason(), "json_too_large");
  // Unescaped length: "\u00e9" is two bytes of UTF-8.
  EXPECT_TRUE(ParseJson(R"(["\u00e9"])", strings).ok());
}

TEST(ParseJsonTest, RefusesWhatIsNotJsonWithTheOffset) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "nul", "[1] 2", "\"\xff\""}) {
    Result<nlohmann::json> doc = ParseJson(text, JsonLimits{});
    ASSERT_FALSE(doc.ok()) << text;
    EXPECT_EQ(doc.status().reason(), "invalid_json") << text;
    EXPECT_NE(doc.status().message().find("not valid JSON at byte"), std::string::npos)
        << doc.status();
    // The parser quotes what it last read; the sender's bytes come back escaped, so the
    // message is printable ASCII whatever they were.
    for (const char c : doc.status().message())
      EXPECT_TRUE(c >= 0x20 && c < 0x7F) << doc.status();
  }
  Result<nlohmann::json> doc = ParseJson("{\"a\":\xc3(\x01}", JsonLimits{});
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("\\xC3"), std::string::npos) << doc.status();
}

}  // namespace
}  // namespace expanse::wire
