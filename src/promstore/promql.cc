#include "promstore/promql.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/quote.h"
#include "promstore/remote_write.h"
#include "wire/json_parse.h"

namespace expanse::promstore {

std::string QuoteString(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(c));
          out += hex;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string ExactAlternation(const std::vector<std::string>& values) {
  std::string out;
  bool first = true;
  for (const std::string& value : values) {
    if (!first)
      out.push_back('|');
    first = false;
    for (const char c : value) {
      if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos)
        out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

namespace {

std::vector<std::string> Distinct(const std::vector<tsdb::SeriesKey>& keys,
                                  std::string (*field)(const tsdb::SeriesKey&)) {
  std::set<std::string> seen;
  for (const tsdb::SeriesKey& key : keys)
    seen.insert(field(key));
  return {seen.begin(), seen.end()};
}

}  // namespace

std::string SeriesSelector(const std::vector<tsdb::SeriesKey>& keys) {
  const std::string compute = keys.empty() ? "" : keys.front().compute_id;
  const std::vector<std::string> names =
      Distinct(keys, [](const tsdb::SeriesKey& k) { return MetricName(k.metric); });
  const std::vector<std::string> hosts =
      Distinct(keys, [](const tsdb::SeriesKey& k) { return k.host; });
  const std::vector<std::string> gpus =
      Distinct(keys, [](const tsdb::SeriesKey& k) { return k.device; });
  // The regular expressions are quoted as strings too: PromQL unescapes the string first.
  return "{__name__=~" + QuoteString(ExactAlternation(names)) + "," + kComputeLabel + "=" +
         QuoteString(compute) + "," + kHostLabel + "=~" + QuoteString(ExactAlternation(hosts)) +
         "," + kDeviceLabel + "=~" + QuoteString(ExactAlternation(gpus)) + "}";
}

std::string BucketAggregatesQuery(std::string_view selector, int64_t window_ms) {
  const std::string range = std::string(selector) + "[" + std::to_string(window_ms) + "ms]";
  static constexpr std::pair<const char*, const char*> kAggregates[] = {
      {"min_over_time", "min"},
      {"max_over_time", "max"},
      {"avg_over_time", "mean"},
      {"last_over_time", "last"},
      {"count_over_time", "count"}};
  std::string query;
  for (const auto& [function, name] : kAggregates) {
    if (!query.empty())
      query += " or ";
    query += std::string("label_set(") + function + "(" + range + ") keep_metric_names, " +
             QuoteString(kAggregateLabel) + ", " + QuoteString(name) + ")";
  }
  return query;
}

std::string ApiTime(int64_t t_ms) {
  const int64_t seconds = t_ms / 1000;
  const int64_t millis = t_ms % 1000;
  char text[48];
  std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(seconds),
                static_cast<long long>(millis));
  return text;
}

namespace {

// A point's time: seconds as a JSON number. Kept within what int64 milliseconds hold.
Result<int64_t> PointTime(const nlohmann::json& t, std::string_view where) {
  if (!t.is_number())
    return InvalidArgumentError(std::string(where) + ": the time is not a number");
  const double seconds = t.get<double>();
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 9.2e15)
    return InvalidArgumentError(std::string(where) + ": the time is out of range");
  return static_cast<int64_t>(std::llround(seconds * 1000.0));
}

Result<double> PointValue(const nlohmann::json& v, std::string_view where) {
  if (!v.is_string())
    return InvalidArgumentError(std::string(where) + ": the value is not a string");
  const std::string& text = v.get_ref<const std::string&>();
  if (text == "NaN")
    return std::nan("");
  if (text == "+Inf" || text == "Inf")
    return HUGE_VAL;
  if (text == "-Inf")
    return -HUGE_VAL;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    return InvalidArgumentError(std::string(where) + ": the value is not a number");
  return value;
}

Result<std::pair<int64_t, double>> Point(const nlohmann::json& point, std::string_view where) {
  if (!point.is_array() || point.size() != 2)
    return InvalidArgumentError(std::string(where) + " is not a [time, value] pair");
  EXPANSE_ASSIGN_OR_RETURN(const int64_t t_ms, PointTime(point[0], where));
  EXPANSE_ASSIGN_OR_RETURN(const double value, PointValue(point[1], where));
  return std::pair{t_ms, value};
}

}  // namespace

Result<std::vector<AnswerSeries>> ParseQueryAnswer(std::string_view body) {
  // A query answer is a deep as [[t, v]] inside an object in an array inside two objects.
  wire::JsonLimits limits;
  limits.max_depth = 8;
  limits.max_values = 50'000'000;
  limits.max_string_bytes = 64u << 10;
  Result<nlohmann::json> parsed = wire::ParseJson(body, limits);
  if (!parsed.ok()) {
    return InvalidArgumentError("the telemetry store's answer is not usable JSON: " +
                                parsed.status().message().substr(0, 200));
  }
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object())
    return InvalidArgumentError("the telemetry store's answer is not a JSON object");
  const auto status = doc.find("status");
  if (status == doc.end() || !status->is_string())
    return InvalidArgumentError("the telemetry store's answer has no status");
  if (*status == "error") {
    std::string message = "the telemetry store refused the query";
    const auto error = doc.find("error");
    if (error != doc.end() && error->is_string())
      message += ": " + error->get<std::string>().substr(0, 300);
    return UnavailableError(message);
  }
  if (*status != "success")
    return InvalidArgumentError("the telemetry store's answer has an unknown status");
  const auto data = doc.find("data");
  if (data == doc.end() || !data->is_object())
    return InvalidArgumentError("the telemetry store's answer has no data object");
  const auto type = data->find("resultType");
  const auto result = data->find("result");
  if (type == data->end() || !type->is_string() || result == data->end() || !result->is_array()) {
    return InvalidArgumentError("the telemetry store's answer has no resultType and result");
  }
  const bool matrix = *type == "matrix";
  if (!matrix && *type != "vector") {
    return InvalidArgumentError("the telemetry store's answer is of type " + type->dump() +
                                ", not matrix or vector");
  }
  std::vector<AnswerSeries> out;
  out.reserve(result->size());
  for (size_t i = 0; i < result->size(); ++i) {
    const std::string where = "result[" + std::to_string(i) + "]";
    const nlohmann::json& item = (*result)[i];
    if (!item.is_object())
      return InvalidArgumentError(where + " is not an object");
    AnswerSeries series;
    const auto metric = item.find("metric");
    if (metric == item.end() || !metric->is_object())
      return InvalidArgumentError(where + " has no metric object");
    for (const auto& [name, value] : metric->items()) {
      if (!value.is_string())
        return InvalidArgumentError(where + ".metric." + QuoteForMessage(name) +
                                    " is not a string");
      series.labels.emplace(name, value.get<std::string>());
    }
    if (matrix) {
      const auto values = item.find("values");
      if (values == item.end() || !values->is_array())
        return InvalidArgumentError(where + " has no values array");
      series.points.reserve(values->size());
      for (size_t j = 0; j < values->size(); ++j) {
        EXPANSE_ASSIGN_OR_RETURN(auto point,
                                 Point((*values)[j], where + ".values[" + std::to_string(j) + "]"));
        series.points.push_back(point);
      }
    } else {
      const auto value = item.find("value");
      if (value == item.end())
        return InvalidArgumentError(where + " has no value");
      EXPANSE_ASSIGN_OR_RETURN(auto point, Point(*value, where + ".value"));
      series.points.push_back(point);
    }
    out.push_back(std::move(series));
  }
  return out;
}

}  // namespace expanse::promstore
