// What the remote telemetry store says to a Prometheus-compatible query API: the PromQL that
// computes downsample.h's buckets there, and the parsing of the answers, which come from
// another program over the network and are checked as such.
#ifndef EXPANSE_PROMSTORE_PROMQL_H_
#define EXPANSE_PROMSTORE_PROMQL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tsdb/sample.h"

namespace expanse::promstore {

// `value` as a PromQL string literal: double quotes, with backslash, quote and control
// characters escaped.
std::string QuoteString(std::string_view value);

// A regular expression (RE2, which Prometheus and VictoriaMetrics use; anchored by them) that
// matches exactly the given values: each with its metacharacters escaped, joined by '|'. An
// empty value matches a series without the label.
std::string ExactAlternation(const std::vector<std::string>& values);

// The selector of every series of `keys` (all of one compute):
//   {__name__=~"m1|m2",compute="c",host=~"h1|h2",device=~"d1|d2"}
// It may also select series of the product of those names, hosts and devices that were not
// asked for; the caller keeps only the ones it asked for.
std::string SeriesSelector(const std::vector<tsdb::SeriesKey>& keys);

// The label that tells the aggregates of BucketAggregatesQuery apart, and its values.
inline constexpr char kAggregateLabel[] = "expanse_agg";

// The five figures of a downsample.h bucket (min, max, mean, last, count) of each selected
// series over the window_ms milliseconds up to each evaluation time, in one query: one result
// series per (series, aggregate), keeping the metric name, with kAggregateLabel naming the
// aggregate ("min", "max", "mean", "last", "count").
std::string BucketAggregatesQuery(std::string_view selector, int64_t window_ms);

// Seconds with millisecond decimals, as the query API takes times ("1796318004.999").
std::string ApiTime(int64_t t_ms);

// One series of a query's answer.
struct AnswerSeries {
  std::map<std::string, std::string> labels;
  std::vector<std::pair<int64_t, double>> points;  // (Unix ms, value), as given
};

// Parses an answer of /api/v1/query_range ("matrix") or /api/v1/query ("vector"):
//   {"status":"success","data":{"resultType":"matrix","result":[
//     {"metric":{"__name__":"...",...},"values":[[1796318004.999,"5"],...]}]}}
// An answer with "status":"error" is kUnavailable with the store's message (cut to 300
// bytes); anything else not of that shape is kInvalidArgument saying what is wrong. Values
// are decimal strings or NaN/+Inf/-Inf; times are seconds, rounded to milliseconds.
Result<std::vector<AnswerSeries>> ParseQueryAnswer(std::string_view body);

}  // namespace expanse::promstore

#endif  // EXPANSE_PROMSTORE_PROMQL_H_
