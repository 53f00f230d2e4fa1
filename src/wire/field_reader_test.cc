#include "wire/field_reader.h"

#include <cstdint>
#include <limits>

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
  EXPECT_FALSE(r.Array("missing", 1, Need::kRequired).ok());
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

TEST(FieldReaderTest, NamesKeepToTheirAlphabet) {
  const json doc = {{"metric", "gpu.Sm"}, {"host", "node-1.a_b"}};
  const FieldReader r = Reader(doc);
  EXPECT_EQ(r.Name("metric", 64, "._", false, Need::kRequired).status().message(),
            "rec.metric may contain only [a-z0-9._]");
  EXPECT_EQ(*r.Name("host", 64, "._-", true, Need::kRequired), "node-1.a_b");
}

}  // namespace
}  // namespace expanse::wire
