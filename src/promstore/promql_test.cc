// The PromQL the remote store sends and the parsing of the query API's answers, hostile ones
// included (the answer comes over the network from another program).
#include "promstore/promql.h"

#include <cmath>

#include <gtest/gtest.h>

namespace expanse::promstore {
namespace {

TEST(QuoteString, EscapesWhatPromqlStringsNeed) {
  EXPECT_EQ(QuoteString("node01"), "\"node01\"");
  EXPECT_EQ(QuoteString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(QuoteString("l1\nl2\t"), "\"l1\\nl2\\t\"");
  EXPECT_EQ(QuoteString(std::string("\x01", 1)), "\"\\x01\"");
}

TEST(ExactAlternation, EscapesRegexMetacharacters) {
  EXPECT_EQ(ExactAlternation({"node01.example", "gpu[1]"}), "node01\\.example|gpu\\[1\\]");
  EXPECT_EQ(ExactAlternation({"a+b", "(c)|d*"}), "a\\+b|\\(c\\)\\|d\\*");
  // An empty value stays an empty alternative: it selects series without the label.
  EXPECT_EQ(ExactAlternation({"", "GPU-1"}), "|GPU-1");
}

TEST(SeriesSelector, OneComputeWithEachLabelsValues) {
  const std::vector<tsdb::SeriesKey> keys = {{"cmp_a", "n1.x", "GPU-1", "gpu.sm_util"},
                                             {"cmp_a", "n1.x", "GPU-2", "gpu.sm_util"},
                                             {"cmp_a", "n1.x", "", "host.cpu"}};
  EXPECT_EQ(SeriesSelector(keys),
            "{__name__=~\"expanse_gpu_sm_util|expanse_host_cpu\",compute=\"cmp_a\","
            "host=~\"n1\\\\.x\",device=~\"|GPU-1|GPU-2\"}");
}

TEST(BucketAggregatesQuery, FiveAggregatesOverTheWindowLabelled) {
  const std::string q = BucketAggregatesQuery("{a=\"b\"}", 5000);
  EXPECT_NE(q.find("label_set(min_over_time({a=\"b\"}[5000ms]) keep_metric_names, "
                   "\"expanse_agg\", \"min\")"),
            std::string::npos)
      << q;
  for (const char* f : {"max_over_time", "avg_over_time", "last_over_time", "count_over_time"})
    EXPECT_NE(q.find(f), std::string::npos) << f;
}

TEST(ApiTime, SecondsWithMillisecondDecimals) {
  EXPECT_EQ(ApiTime(1796318004999), "1796318004.999");
  EXPECT_EQ(ApiTime(1000), "1.000");
  EXPECT_EQ(ApiTime(7), "0.007");
}

TEST(ParseQueryAnswer, AMatrix) {
  const auto answer = ParseQueryAnswer(
      R"({"status":"success","data":{"resultType":"matrix","result":[)"
      R"({"metric":{"__name__":"expanse_gpu_sm_util","host":"n1","expanse_agg":"min"},)"
      R"("values":[[1796318004.999,"5"],[1796318009.999,"2.5e1"],[1796318014.999,"NaN"]]}]}})");
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->size(), 1u);
  const AnswerSeries& s = answer->front();
  EXPECT_EQ(s.labels.at("host"), "n1");
  EXPECT_EQ(s.labels.at("expanse_agg"), "min");
  ASSERT_EQ(s.points.size(), 3u);
  EXPECT_EQ(s.points[0].first, 1796318004999);
  EXPECT_EQ(s.points[0].second, 5);
  EXPECT_EQ(s.points[1].first, 1796318009999);
  EXPECT_EQ(s.points[1].second, 25);
  EXPECT_TRUE(std::isnan(s.points[2].second));
}

TEST(ParseQueryAnswer, AVector) {
  const auto answer =
      ParseQueryAnswer(R"({"status":"success","data":{"resultType":"vector","result":[)"
                       R"({"metric":{"a":"b"},"value":[1.5,"-Inf"]}]}})");
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->front().points.size(), 1u);
  EXPECT_EQ(answer->front().points[0].first, 1500);
  EXPECT_EQ(answer->front().points[0].second, -HUGE_VAL);
}

TEST(ParseQueryAnswer, AnErrorAnswerIsUnavailableWithTheStoresMessage) {
  const auto answer = ParseQueryAnswer(
      R"({"status":"error","errorType":"422","error":"cannot parse query: unexpected token"})");
  EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answer.status().message().find("cannot parse query"), std::string::npos);
}

// The refusal names what is wrong without repeating the answer's text at length: a label name
// of 10,000 bytes (found by fuzz_promql_answer) is cut.
TEST(ParseQueryAnswer, ARefusalsMessageStaysShort) {
  const std::string body =
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{")" +
      std::string(10'000, 'x') + R"(":1},"value":[1,"1"]}]}})";
  const auto answer = ParseQueryAnswer(body);
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_LT(answer.status().message().size(), 200u) << answer.status().message().size();
}

TEST(ParseQueryAnswer, RefusesWhatIsNotAnAnswer) {
  const char* const bad[] = {
      "",
      "not json",
      "[]",
      R"({"data":{}})",
      R"({"status":"maybe"})",
      R"({"status":"success"})",
      R"({"status":"success","data":{"resultType":"scalar","result":[1,"2"]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":{}}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[1]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"values":[]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":1},"values":[]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["1","2"]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,2]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2x"]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[-1,"2"]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"2"]]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]"
      "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
  };
  for (const char* body : bad) {
    const auto answer = ParseQueryAnswer(body);
    EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_FALSE(answer.status().message().empty()) << body;
  }
}

}  // namespace
}  // namespace expanse::promstore
