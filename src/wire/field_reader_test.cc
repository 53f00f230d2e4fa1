#include "wire/field_reader.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

using nlohmann::json;

FieldReader Reader(const json& value) {  // `value` must outlive the reader
  Result<FieldReader> r = FieldReader::Object(value, "rec", "bad_record");
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(FieldReaderTest, RefusesNonObjectsByPath) {
  for (const json& value : {json(5), json("x"), json::array({1}), json(nullptr)}) {
    Result<FieldReader> r = FieldReader::Object(value, "batch.series[2]", "invalid_batch");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(
        r.status(),
        InvalidArgumentError("batch.series[2] must be an object").WithReason("invalid_batch"));
  }
}

TEST(FieldReaderTest, WronglyTypedMembersAreRefusedNeverThrown) {
  // Each of these made nlohmann's value() throw, which ended the controller.
  const json doc = {
      {"version", "1"}, {"at_ms", "soon"}, {"host", 5}, {"flag", "yes"}, {"list", "no"}};
  const FieldReader r = Reader(doc);
  EXPECT_EQ(r.Int("version", 1, 1, Need::kRequired).status().message(),
            "rec.version must be an integer from 1 to 1");
  EXPECT_EQ(r.Int("at_ms", 1, 10, Need::kOptional).status().message(),
            "rec.at_ms must be an integer from 1 to 10");
  EXPECT_EQ(r.Text("host", 10, Need::kRequired).status().message(), "rec.host must be a string");
  EXPECT_EQ(r.Bool("flag", false).status().message(), "rec.flag must be true or false");
  EXPECT_EQ(r.Array("list", 5, Need::kOptional).status().message(), "rec.list must be an array");
  EXPECT_EQ(r.Int("at_ms", 0, 1, Need::kOptional).status().reason(), "bad_record");
}

TEST(FieldReaderTest, AbsentAndNullMembers) {
  const json doc = {{"gone", nullptr}};
  const FieldReader r = Reader(doc);
  EXPECT_EQ(*r.Text("gone", 10, Need::kOptional), "");
  EXPECT_EQ(r.Text("gone", 10, Need::kRequired).status().message(), "rec.gone is required");
  EXPECT_EQ(*r.Int("missing", 0, 5, Need::kOptional, 3), 3);
  EXPECT_EQ(r.Int("missing", 0, 5, Need::kRequired).status().message(),
            "rec.missing must be an integer from 0 to 5");
  EXPECT_TRUE(*r.Bool("missing", true));
  EXPECT_EQ(*r.Array("missing", 1, Need::kOptional), nullptr);
  EXPECT_EQ(r.Array("missing", 1, Need::kRequired).status().message(), "rec.missing is required");
}

TEST(FieldReaderTest, IntegersAreCheckedWithoutWrapping) {
  const json doc = {{"big", std::numeric_limits<uint64_t>::max()},
                    {"max", std::numeric_limits<int64_t>::max()},
                    {"float", 2.0},
                    {"neg", -4}};
  const FieldReader r = Reader(doc);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(r.Int("big", 0, kMax, Need::kRequired).ok());  // would wrap to -1
  EXPECT_EQ(*r.Int("max", 0, kMax, Need::kRequired), kMax);
  EXPECT_FALSE(r.Int("float", 0, 5, Need::kRequired).ok());
  EXPECT_FALSE(r.Int("neg", 0, 5, Need::kRequired).ok());
  EXPECT_EQ(*r.Int("neg", -5, 5, Need::kRequired), -4);
}

TEST(FieldReaderTest, TextIsCleanUtf8WithinItsLength) {
  json doc = {{"ok", "héllo"}, {"long", "abcdef"}, {"ctl", "a\tb"}, {"empty", ""}};
  doc["bad_utf8"] = std::string("\xff\xfe");  // a DOM built in code can hold it
  const FieldReader r = Reader(doc);
  EXPECT_EQ(*r.Text("ok", 6, Need::kRequired), "héllo");
  EXPECT_EQ(r.Text("long", 5, Need::kRequired).status().message(),
            "rec.long is longer than 5 bytes");
  EXPECT_EQ(r.Text("ctl", 5, Need::kRequired).status().message(),
            "rec.ctl contains a control character");
  EXPECT_EQ(r.Text("bad_utf8", 5, Need::kRequired).status().message(),
            "rec.bad_utf8 is not valid UTF-8");
  EXPECT_EQ(r.Text("empty", 5, Need::kRequired).status().message(), "rec.empty is empty");
  EXPECT_EQ(*r.Text("empty", 5, Need::kOptional), "");
}

TEST(FieldReaderTest, TerminalTextHasNoC1Controls) {
  EXPECT_TRUE(IsTerminalText("caf\xc3\xa9 \xc2\xa0 \xe2\x80\xa6"));  // é, NBSP, …
  EXPECT_TRUE(IsTerminalText(""));
  // C1 is clean text (stored as sent) but never terminal text: U+0080, U+0085, U+009B, U+009F.
  for (const char* c1 : {"\xc2\x80", "\xc2\x85", "\xc2\x9b", "\xc2\x9f"}) {
    const std::string text = std::string("busy ") + c1 + "2J";
    EXPECT_TRUE(IsCleanText(text)) << text;
    EXPECT_FALSE(IsTerminalText(text)) << text;
  }
  EXPECT_FALSE(IsTerminalText("a\x1b[2J"));
  EXPECT_FALSE(IsTerminalText("\xc2"));  // cut inside a character
}

TEST(FieldReaderTest, NamesKeepToTheirAlphabet) {
  const json doc = {{"metric", "gpu.Sm"}, {"host", "node-1.a_b"}};
  const FieldReader r = Reader(doc);
  EXPECT_EQ(r.Name("metric", 64, "._", false, Need::kRequired).status().message(),
            "rec.metric may contain only [a-z0-9._]");
  EXPECT_EQ(*r.Name("host", 64, "._-", true, Need::kRequired), "node-1.a_b");
}

TEST(FieldReaderTest, UnsignedIntegersUpToTheirFullRange) {
  const json doc = {
      {"big", std::numeric_limits<uint64_t>::max()}, {"neg", -1}, {"float", 1.5}, {"text", "7"}};
  const FieldReader r = Reader(doc);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(*r.Uint("big", kMax, Need::kRequired), kMax);
  EXPECT_EQ(r.Uint("big", 10, Need::kRequired).status().message(),
            "rec.big must be an integer from 0 to 10");
  for (const char* key : {"neg", "float", "text", "missing"})
    EXPECT_FALSE(r.Uint(key, kMax, Need::kRequired).ok()) << key;
  EXPECT_EQ(*r.Uint("missing", kMax, Need::kOptional, 9), 9u);
}

TEST(FieldReaderTest, DoublesInRangeAndNeverNan) {
  json doc = {{"half", 0.5}, {"int", 3}, {"text", "1"}, {"huge", 1e300}};
  doc["nan"] = std::numeric_limits<double>::quiet_NaN();  // only a DOM built in code
  const FieldReader r = Reader(doc);
  EXPECT_EQ(*r.Double("half", 0, 1, Need::kRequired), 0.5);
  EXPECT_EQ(*r.Double("int", 0, 5, Need::kRequired), 3.0);
  EXPECT_EQ(r.Double("huge", 0, 100, Need::kRequired).status().message(),
            "rec.huge must be a number from 0.0 to 100.0");
  EXPECT_FALSE(r.Double("text", 0, 5, Need::kRequired).ok());
  EXPECT_FALSE(r.Double("nan", -1e308, 1e308, Need::kRequired).ok());
  EXPECT_EQ(*r.Double("missing", 0, 1, Need::kOptional, 0.25), 0.25);
}

TEST(FieldReaderTest, ExpectNamesWhatItFoundAndWhatItReads) {
  const json doc = {{"format", 2}, {"version", 1}, {"odd", "one"}};
  const FieldReader r = Reader(doc);
  EXPECT_TRUE(r.Expect("version", 1).ok());
  Status status = r.Expect("format", 1);
  EXPECT_EQ(status.message(), "rec.format is 2; this build reads format 1");
  EXPECT_EQ(status.reason(), "unsupported_format");
  EXPECT_EQ(r.Expect("odd", 1).message(), "rec.odd is \"one\"; this build reads odd 1");
  EXPECT_EQ(r.Expect("missing", 1).message(), "rec.missing is required");
}

TEST(FieldReaderTest, TextListsAreCheckedElementByElement) {
  const json doc = {{"ok", {"a", "b"}}, {"mixed", {"a", 5}}, {"empty", {"a", ""}}, {"one", "a"}};
  const FieldReader r = Reader(doc);
  EXPECT_EQ(*r.Texts("ok", 2, 4, Need::kRequired), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.Texts("ok", 1, 4, Need::kRequired).status().message(),
            "rec.ok has more than 1 entries");
  EXPECT_EQ(r.Texts("mixed", 2, 4, Need::kRequired).status().message(),
            "rec.mixed[1] must be a string");
  EXPECT_EQ(r.Texts("empty", 2, 4, Need::kRequired).status().message(), "rec.empty[1] is empty");
  EXPECT_EQ(r.Texts("one", 2, 4, Need::kRequired).status().message(), "rec.one must be an array");
  EXPECT_TRUE(r.Texts("missing", 2, 4, Need::kOptional)->empty());
}

TEST(FieldReaderTest, NestedObjectsCarryTheirPath) {
  const json doc = {{"inner", {{"n", "x"}}},
                    {"list", json::array({{{"n", 1}}, {{"n", "y"}}})},
                    {"notobj", 5},
                    {"badlist", {1}}};
  const FieldReader r = Reader(doc);
  Result<FieldReader> inner = r.Member("inner", Need::kRequired);
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(inner->Int("n", 0, 1, Need::kRequired).status().message(),
            "rec.inner.n must be an integer from 0 to 1");
  Result<FieldReader> absent = r.Member("absent", Need::kOptional);
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent->Text("n", 5, Need::kOptional), "");
  EXPECT_EQ(r.Member("absent", Need::kRequired).status().message(), "rec.absent is required");
  EXPECT_EQ(r.Member("notobj", Need::kOptional).status().message(), "rec.notobj must be an object");
  Result<std::vector<FieldReader>> list = r.Objects("list", 5, Need::kRequired);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].Int("n", 0, 1, Need::kRequired).status().message(),
            "rec.list[1].n must be an integer from 0 to 1");
  EXPECT_EQ(r.Objects("badlist", 5, Need::kRequired).status().message(),
            "rec.badlist[0] must be an object");
}

TEST(FieldReaderTest, TheDocumentItselfHasAnEmptyPath) {
  const json doc = {{"version", "x"}};
  Result<FieldReader> r = FieldReader::Object(doc, "", "invalid_config");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Int("version", 1, 1, Need::kRequired).status().message(),
            "version must be an integer from 1 to 1");
  EXPECT_EQ(r->ElementPath("files", 2), "files[2]");
  const json list = json::array();
  EXPECT_EQ(FieldReader::Object(list, "", "x").status().message(),
            "the document must be an object");
}

}  // namespace
}  // namespace expanse::wire
