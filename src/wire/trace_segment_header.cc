#include "wire/trace_segment_header.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "wire/field_reader.h"

namespace expanse::wire {

namespace {

constexpr int64_t kMaxSamples = int64_t{1} << 62;

constexpr size_t kMaxStallReasons = 256;  // CUPTI names a few dozen
constexpr size_t kBriefed = 5;            // stall reasons and functions in the brief

// A name for the brief: cut, control characters shown as '?'.
std::string CleanName(const std::string& name) {
  std::string out = name.substr(0, kMaxPcSamplingNameBytes);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  }
  return out;
}

// A {name: samples} member of `r` (at most kMaxStallReasons) as pairs, the `keep` largest
// first; Bad when it is not one.
Result<std::vector<std::pair<std::string, int64_t>>> StallCounts(const FieldReader& r,
                                                                 const char* key, size_t keep) {
  std::vector<std::pair<std::string, int64_t>> out;
  const nlohmann::json* stalls = r.Find(key);
  if (stalls == nullptr)
    return out;
  if (!stalls->is_object() || stalls->size() > kMaxStallReasons)
    return r.Bad(key, "must be an object of at most 256 stall reasons and their sample counts");
  std::vector<std::pair<const std::string*, int64_t>> counts;
  for (const auto& [name, samples] : stalls->items()) {
    if (!samples.is_number_integer() || samples.get<int64_t>() < 0 ||
        samples.get<int64_t>() > kMaxSamples)
      return r.Bad(key, "must map each stall reason to a sample count");
    counts.emplace_back(&name, samples.get<int64_t>());
  }
  const size_t n = std::min(keep, counts.size());
  std::partial_sort(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(n), counts.end(),
                    [](const auto& a, const auto& b) {
                      return a.second != b.second ? a.second > b.second : *a.first < *b.first;
                    });
  for (size_t i = 0; i < n; ++i)
    out.emplace_back(CleanName(*counts[i].first), counts[i].second);
  return out;
}

Result<std::string> PcSamplingSummary(const FieldReader& other) {
  if (other.Find("pc_sampling") == nullptr)
    return std::string();
  EXPANSE_ASSIGN_OR_RETURN(FieldReader pc, other.Member("pc_sampling", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const std::string state, pc.Text("state", 16, Need::kRequired));
  if (state == "restricted" || state == "unavailable") {
    // The agent cuts a reason to 512 bytes and makes its control characters spaces.
    EXPANSE_ASSIGN_OR_RETURN(const std::string reason, pc.Text("reason", 512, Need::kOptional));
    return nlohmann::json{{"state", state}, {"reason", reason}}.dump();
  }
  if (state != "sampled")
    return pc.Bad("state", "must be sampled, restricted or unavailable");
  nlohmann::json summary = {{"state", state}};
  EXPANSE_ASSIGN_OR_RETURN(const int64_t total,
                           pc.Int("total_samples", 0, kMaxSamples, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const int64_t dropped,
                           pc.Int("dropped_samples", 0, kMaxSamples, Need::kOptional));
  summary["total_samples"] = total;
  summary["dropped_samples"] = dropped;
  EXPANSE_ASSIGN_OR_RETURN(auto stalls, StallCounts(pc, "stall_reasons", kBriefed));
  summary["stall_reasons"] = stalls;
  // The agent lists at most 50 functions, those with the most samples first, each with at
  // most 16 instructions; every one is checked, the first five briefed.
  EXPANSE_ASSIGN_OR_RETURN(std::vector<FieldReader> functions,
                           pc.Objects("functions", 50, Need::kOptional));
  nlohmann::json listed = nlohmann::json::array();
  for (size_t i = 0; i < functions.size(); ++i) {
    const nlohmann::json* name = functions[i].Find("name");
    if (name == nullptr || !name->is_string())
      return functions[i].Bad("name", "must be a string");
    EXPANSE_ASSIGN_OR_RETURN(const int64_t samples,
                             functions[i].Int("samples", 0, kMaxSamples, Need::kRequired));
    EXPANSE_ASSIGN_OR_RETURN(auto function_stalls, StallCounts(functions[i], "stall_reasons", 1));
    EXPANSE_RETURN_IF_ERROR(functions[i].Array("pcs", 16, Need::kOptional).status());
    if (i < kBriefed) {
      listed.push_back({{"name", CleanName(name->get<std::string>())},
                        {"samples", samples},
                        {"stall", function_stalls.empty() ? "" : function_stalls[0].first}});
    }
  }
  summary["functions"] = std::move(listed);
  // Escapes can lengthen names: the least busy functions, then stall reasons, give way.
  auto dumped = [&summary] {
    return summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string text = dumped();
  while (text.size() > kMaxPcSamplingSummaryBytes && !summary["functions"].empty()) {
    summary["functions"].erase(summary["functions"].size() - 1);
    text = dumped();
  }
  while (text.size() > kMaxPcSamplingSummaryBytes && !summary["stall_reasons"].empty()) {
    summary["stall_reasons"].erase(summary["stall_reasons"].size() - 1);
    text = dumped();
  }
  return text;
}

}  // namespace

JsonLimits TraceSegmentJsonLimits() {
  JsonLimits limits;
  limits.max_values = 8'000'000;
  limits.max_string_bytes = 4096;
  limits.max_depth = 8;
  return limits;
}

Result<TraceSegmentHeader> DecodeTraceSegmentHeader(const nlohmann::json& doc,
                                                    std::string_view where,
                                                    std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader top,
                           FieldReader::Object(doc, std::string(where), std::string(reason)));
  const nlohmann::json* events = top.Find("traceEvents");
  if (events == nullptr || !events->is_array())
    return top.Bad("traceEvents", "must be an array");
  EXPANSE_ASSIGN_OR_RETURN(FieldReader other, top.Member("otherData", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const std::string format, other.Text("format", 64, Need::kRequired));
  if (format != kTraceSegmentFormat)
    return other.Bad("format", std::string("is not ") + kTraceSegmentFormat);
  TraceSegmentHeader h;
  EXPANSE_ASSIGN_OR_RETURN(h.job_id, other.Text("job_id", 64, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.host, other.Text("host", 253, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.pid, other.Int("pid", 1, int64_t{1} << 31, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.uid, other.Int("uid", 0, int64_t{1} << 32, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.window_start_ms,
                           other.Int("window_start_ms", 1, kMaxTimeMs - 1, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      h.window_end_ms, other.Int("window_end_ms", h.window_start_ms,
                                 h.window_start_ms + kMaxTraceSegmentWindowMs, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(FieldReader trigger, other.Member("trigger", Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.trigger_id, trigger.Text("id", 128, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(h.trigger_reason,
                           trigger.Name("reason", 64, "_", false, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(h.events, other.Int("events", 0, int64_t{1} << 40, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(h.dropped_events,
                           other.Int("dropped_events", 0, int64_t{1} << 50, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(h.pc_sampling, PcSamplingSummary(other));
  return h;
}

Result<TraceSegmentHeader> ParseTraceSegmentHeader(std::string_view text, std::string_view where,
                                                   std::string_view reason) {
  if (text.size() > kMaxTraceSegmentBytes) {
    return InvalidArgumentError(std::string(where) + " is " + std::to_string(text.size()) +
                                " bytes; a trace segment is at most " +
                                std::to_string(kMaxTraceSegmentBytes))
        .WithReason(std::string(reason));
  }
  Result<nlohmann::json> doc = ParseJson(text, TraceSegmentJsonLimits());
  if (!doc.ok())
    return InvalidArgumentError(std::string(where) + ": " + doc.status().message())
        .WithReason(std::string(reason));
  return DecodeTraceSegmentHeader(*doc, where, reason);
}

}  // namespace expanse::wire
