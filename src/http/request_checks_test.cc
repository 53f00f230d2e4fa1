#include "http/request_checks.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::http_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using Query = std::multimap<std::string, std::string, std::less<>>;

TEST(ParseTargetTest, DecodesPathAndQuery) {
  struct Case {
    std::string target;
    std::string path;
    Query query;
  };
  const std::vector<Case> cases = {
      {"/", "/", {}},
      {"/api/v1/jobs", "/api/v1/jobs", {}},
      {"/a%2Fb", "/a/b", {}},  // decoded; the router splits raw_path instead
      {"/a%2fb%20c", "/a/b c", {}},
      {"/a+b", "/a+b", {}},          // '+' is a plain character in the path
      {"/100%", "/100%", {}},        // an invalid escape is kept as sent
      {"/a%zzb%4", "/a%zzb%4", {}},  // not two hex digits
      {"/a%4g", "/a%4g", {}},        // one hex digit only
      {"/%41%", "/A%", {}},          // a valid escape next to a cut one
      {"/x?", "/x", {}},             // an empty query
      {"/x?a=1&b=2", "/x", {{"a", "1"}, {"b", "2"}}},
      {"/x?a=1&&b=2&", "/x", {{"a", "1"}, {"b", "2"}}},  // empty pieces skipped
      {"/x?flag", "/x", {{"flag", ""}}},                 // no '=': an empty value
      {"/x?a=1&a=2", "/x", {{"a", "1"}, {"a", "2"}}},
      {"/x?q=a+b%2Bc", "/x", {{"q", "a b+c"}}},  // '+' a space, "%2B" a plus
      {"/x?k%20ey=v%3Dw=z", "/x", {{"k ey", "v=w=z"}}},
      {"/x?p=100%", "/x", {{"p", "100%"}}},
      {"/a%3Fb?c=d", "/a?b", {{"c", "d"}}},  // an encoded '?' is not the query
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target);
    const Result<Target> target = ParseTarget(c.target);
    ASSERT_TRUE(target.ok()) << target.status();
    EXPECT_EQ(target->path, c.path);
    EXPECT_EQ(target->raw_path, c.target.substr(0, c.target.find('?')));
    EXPECT_EQ(target->query, c.query);
  }
}

TEST(ParseTargetTest, DecodesEscapedNulAndHighBytes) {
  const Result<Target> target = ParseTarget("/%00%ff?%00=%C3%A9");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->path, std::string("/\0\xff", 3));
  EXPECT_THAT(target->query, ElementsAre(Pair(std::string(1, '\0'), "\xc3\xa9")));
}

TEST(ParseTargetTest, RefusesTargetsNotInOriginForm) {
  struct Case {
    std::string target;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", R"(the request target "" is not a path starting with "/")"},
      {"*", R"(the request target "*" is not a path starting with "/")"},
      {"http://host/x", R"(the request target "http://host/x" is not a path starting with "/")"},
      {"x/y", R"(the request target "x/y" is not a path starting with "/")"},
      {"?a=1", R"(the request target "?a=1" is not a path starting with "/")"},
      {"%2Fx", R"(the request target "%2Fx" is not a path starting with "/")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target);
    const Result<Target> target = ParseTarget(c.target);
    ASSERT_FALSE(target.ok());
    EXPECT_EQ(target.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(target.status().message(), c.message);
  }
}

TEST(CheckFramingTest, AcceptsUnambiguousFraming) {
  using Kind = Framing::Kind;
  struct Case {
    std::vector<std::string_view> content_lengths;
    std::vector<std::string_view> transfer_encodings;
    Kind kind;
    uint64_t content_length;
  };
  const std::vector<Case> cases = {
      {{}, {}, Kind::kNone, 0},
      {{"0"}, {}, Kind::kContentLength, 0},
      {{"42"}, {}, Kind::kContentLength, 42},
      {{" 42\t"}, {}, Kind::kContentLength, 42},  // spaces around a field value are not part of it
      {{"007"}, {}, Kind::kContentLength, 7},
      {{"9999999999999999999"}, {}, Kind::kContentLength, 9999999999999999999u},  // 19 digits
      {{}, {"chunked"}, Kind::kChunked, 0},
      {{}, {"Chunked"}, Kind::kChunked, 0},
      {{}, {" CHUNKED "}, Kind::kChunked, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.content_lengths) + " " +
                 ::testing::PrintToString(c.transfer_encodings));
    const Result<Framing> framing = CheckFraming(c.content_lengths, c.transfer_encodings);
    ASSERT_TRUE(framing.ok()) << framing.status();
    EXPECT_EQ(framing->kind, c.kind);
    EXPECT_EQ(framing->content_length, c.content_length);
  }
}

TEST(CheckFramingTest, RefusesAmbiguousFraming) {
  constexpr const char* kTwoLengths = "the request has more than one Content-Length header";
  constexpr const char* kNotDecimal = "the Content-Length header is not a decimal number";
  constexpr const char* kBoth = "the request has both Content-Length and Transfer-Encoding";
  constexpr const char* kNotChunked = "Transfer-Encoding other than chunked is not accepted";
  struct Case {
    std::vector<std::string_view> content_lengths;
    std::vector<std::string_view> transfer_encodings;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"5", "5"}, {}, kTwoLengths},  // even when they agree
      {{"5", "6"}, {}, kTwoLengths},
      {{""}, {}, kNotDecimal},
      {{" "}, {}, kNotDecimal},
      {{"+5"}, {}, kNotDecimal},
      {{"-1"}, {}, kNotDecimal},
      {{"5, 5"}, {}, kNotDecimal},
      {{"5,5"}, {}, kNotDecimal},
      {{"0x10"}, {}, kNotDecimal},
      {{"1 2"}, {}, kNotDecimal},
      {{"10000000000000000000"}, {}, kNotDecimal},  // 20 digits
      {{"5"}, {"chunked"}, kBoth},
      {{"abc"}, {"gzip"}, kBoth},
      {{}, {"gzip"}, kNotChunked},
      {{}, {"gzip, chunked"}, kNotChunked},
      {{}, {"chunked, chunked"}, kNotChunked},
      {{}, {"chunked", "chunked"}, kNotChunked},
      {{}, {"identity"}, kNotChunked},
      {{}, {""}, kNotChunked},
      {{}, {"chunkedx"}, kNotChunked},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.content_lengths) + " " +
                 ::testing::PrintToString(c.transfer_encodings));
    const Result<Framing> framing = CheckFraming(c.content_lengths, c.transfer_encodings);
    ASSERT_FALSE(framing.ok());
    EXPECT_EQ(framing.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(framing.status().message(), c.message);
  }
}

// (first, last) pairs, for comparing parsed ranges.
std::vector<std::pair<int64_t, int64_t>> Pairs(const std::vector<ByteRange>& ranges) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (const ByteRange& range : ranges) {
    pairs.emplace_back(range.first, range.last);
  }
  return pairs;
}

TEST(ParseRangeHeaderTest, ParsesWellFormedHeaders) {
  struct Case {
    std::string value;
    std::vector<std::pair<int64_t, int64_t>> ranges;
  };
  const std::vector<Case> cases = {
      {"bytes=0-99", {{0, 99}}},
      {"bytes=500-", {{500, -1}}},
      {"bytes=-500", {{-1, 500}}},
      {"bytes=-", {{-1, -1}}},
      {"bytes=5-5", {{5, 5}}},
      {"bytes=0-1,5-6", {{0, 1}, {5, 6}}},
      {"bytes=0-1, 5-6", {{0, 1}, {5, 6}}},  // as httplib accepted
      {"bytes= 0-1 ,\t5-6 ", {{0, 1}, {5, 6}}},
      {"Bytes=0-1", {{0, 1}}},                                    // the unit is case-insensitive
      {"bytes=999999999999999999-", {{999999999999999999, -1}}},  // 18 digits
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    const std::optional<std::vector<ByteRange>> ranges = ParseRangeHeader(c.value);
    ASSERT_TRUE(ranges.has_value());
    EXPECT_EQ(Pairs(*ranges), c.ranges);
  }
}

TEST(ParseRangeHeaderTest, RefusesMalformedHeaders) {
  const std::vector<std::string> cases = {
      "",
      "bytes",
      "bytes=",
      "bytes=oops",
      "items=0-1",
      "bytes 0-1",
      "bytes=1",
      "bytes=2-1",  // first > last
      "bytes=0-1,",
      "bytes=,0-1",
      "bytes=0-1,,2-3",
      "bytes=0--1",
      "bytes=1-2-3",
      "bytes=+1-2",
      "bytes=0 - 1",
      "bytes=0-0x10",
      "bytes=1000000000000000000-",  // 19 digits
      "bytes=-1000000000000000000",
      "bytes=0-1;2-3",
  };
  for (const std::string& value : cases) {
    SCOPED_TRACE(value);
    EXPECT_FALSE(ParseRangeHeader(value).has_value());
  }
}

std::string ManyRanges(size_t count) {
  std::string value = "bytes=";
  for (size_t i = 0; i < count; ++i) {
    value += (i == 0 ? "" : ",") + std::to_string(i * 10) + "-" + std::to_string(i * 10 + 5);
  }
  return value;
}

TEST(ParseRangeHeaderTest, CapsTheNumberOfRanges) {
  const std::optional<std::vector<ByteRange>> two_thousand = ParseRangeHeader(ManyRanges(2000));
  ASSERT_TRUE(two_thousand.has_value());
  ASSERT_EQ(two_thousand->size(), 2000u);
  EXPECT_EQ(two_thousand->back().first, 19990);
  EXPECT_EQ(two_thousand->back().last, 19995);
  EXPECT_TRUE(ParseRangeHeader(ManyRanges(kMaxRanges)).has_value());
  EXPECT_FALSE(ParseRangeHeader(ManyRanges(kMaxRanges + 1)).has_value());
  EXPECT_FALSE(ParseRangeHeader(ManyRanges(5000)).has_value());
}

TEST(PlanRangeTest, PlansOneRangeAndServesTheRestWhole) {
  using Kind = RangePlan::Kind;
  struct Case {
    std::string header;
    uint64_t size;
    Kind kind;
    uint64_t first = 0;
    uint64_t last = 0;
  };
  const std::vector<Case> cases = {
      {"bytes=10-19", 1000, Kind::kPartial, 10, 19},
      {"bytes=0-0", 1000, Kind::kPartial, 0, 0},
      {"bytes=0-", 1000, Kind::kPartial, 0, 999},
      {"bytes=-10", 1000, Kind::kPartial, 990, 999},
      {"bytes=-1000", 1000, Kind::kPartial, 0, 999},
      {"bytes=-5000", 1000, Kind::kPartial, 0, 999},  // a suffix longer than the content
      {"bytes=990-", 1000, Kind::kPartial, 990, 999},
      {"bytes=995-2000", 1000, Kind::kPartial, 995, 999},
      {"bytes=999-999", 1000, Kind::kPartial, 999, 999},
      {"bytes=1000-", 1000, Kind::kUnsatisfiable},
      {"bytes=1000-2000", 1000, Kind::kUnsatisfiable},
      {"bytes=-0", 1000, Kind::kUnsatisfiable},  // RFC 9110 §14.1.2: selects nothing
      {"bytes=0-1,5-6", 1000, Kind::kWhole},     // more than one range
      {"bytes=0-1,5000-", 1000, Kind::kWhole},
      {"bytes=-", 1000, Kind::kWhole},
      {"bytes=0-9", 0, Kind::kWhole},  // empty content
      {"bytes=-10", 0, Kind::kWhole},
      {"bytes=5-", 0, Kind::kWhole},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header + " of " + std::to_string(c.size));
    const std::optional<std::vector<ByteRange>> ranges = ParseRangeHeader(c.header);
    ASSERT_TRUE(ranges.has_value());
    const RangePlan plan = PlanRange(*ranges, c.size);
    EXPECT_EQ(plan.kind, c.kind);
    if (c.kind == Kind::kPartial) {
      EXPECT_EQ(plan.first, c.first);
      EXPECT_EQ(plan.last, c.last);
    }
  }
}

TEST(PlanRangeTest, NoRangesIsWhole) {
  EXPECT_EQ(PlanRange({}, 1000).kind, RangePlan::Kind::kWhole);
}

TEST(QuoteTest, EscapesAndCuts) {
  struct Case {
    std::string text;
    std::string quoted;
  };
  const std::vector<Case> cases = {
      {"", R"("")"},
      {"/api/v1", R"("/api/v1")"},
      {R"(say "hi")", R"("say \"hi\"")"},
      {R"(a\b)", R"("a\\b")"},
      {"line\r\nbreak\t", R"("line\x0d\x0abreak\x09")"},
      {std::string("nul\0", 4), R"("nul\x00")"},
      {"\x7f\x80\xff", R"("\x7f\x80\xff")"},
      {"caf\xc3\xa9", R"("caf\xc3\xa9")"},
      {std::string(200, 'a'), "\"" + std::string(200, 'a') + "\""},
      {std::string(201, 'a'), "\"" + std::string(200, 'a') + "\"..."},
      {std::string(199, 'a') + "\x01z", "\"" + std::string(199, 'a') + "\\x01\"..."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.quoted);
    EXPECT_EQ(Quote(c.text), c.quoted);
  }
}

TEST(ReasonPhraseTest, NamesKnownCodes) {
  const std::vector<std::pair<int, std::string_view>> cases = {
      {200, "OK"},
      {206, "Partial Content"},
      {404, "Not Found"},
      {413, "Content Too Large"},
      {416, "Range Not Satisfiable"},
      {431, "Request Header Fields Too Large"},
      {503, "Service Unavailable"},
      {999, "Unknown"},
      {0, "Unknown"},
      {-1, "Unknown"},
  };
  for (const auto& [status, phrase] : cases) {
    SCOPED_TRACE(status);
    EXPECT_EQ(ReasonPhrase(status), phrase);
  }
}

}  // namespace
}  // namespace expanse::http_internal
