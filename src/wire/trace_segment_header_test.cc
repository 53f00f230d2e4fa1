#include "wire/trace_segment_header.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

using nlohmann::json;

// As libexpanse-agent.so writes it (capture/trace_segment.cc).
json Segment() {
  return json::parse(R"({"displayTimeUnit": "ms",
    "traceEvents": [{"ph": "X", "cat": "kernel", "name": "_Z4gemmv", "pid": 777, "tid": 1000007,
                     "ts": 1796000000100.0, "dur": 2000.0}],
    "otherData": {"format": "expanse-trace-segment/1", "job_id": "4242", "step_id": "0",
                  "rank": "3", "host": "gpu7", "pid": 777, "process_start_ticks": 123456,
                  "uid": 1001, "window_start_ms": 1796000000000, "window_end_ms": 1796000010000,
                  "trigger": {"id": "4242-1796000000000-GPU-3f0f2b8c", "reason": "gpu_idle",
                              "gpus": ["GPU-3f0f2b8c"]},
                  "events": 1, "dropped_events": 0}})");
}

TEST(TraceSegmentHeader, DecodesTheAgentsOtherData) {
  auto h = ParseTraceSegmentHeader(Segment().dump(), "seg", "bad_segment");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->job_id, "4242");
  EXPECT_EQ(h->host, "gpu7");
  EXPECT_EQ(h->pid, 777);
  EXPECT_EQ(h->uid, 1001);
  EXPECT_EQ(h->window_start_ms, 1796000000000);
  EXPECT_EQ(h->window_end_ms, 1796000010000);
  EXPECT_EQ(h->trigger_id, "4242-1796000000000-GPU-3f0f2b8c");
  EXPECT_EQ(h->trigger_reason, "gpu_idle");
  EXPECT_EQ(h->events, 1);
}

TEST(TraceSegmentHeader, RefusesWhatIsNotASegmentNamingTheField) {
  const auto refused = [](const json& doc) {
    auto h = ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment");
    EXPECT_FALSE(h.ok());
    if (!h.ok()) {
      EXPECT_EQ(h.status().reason(), "bad_segment");
    }
    return h.ok() ? std::string() : h.status().message();
  };
  json doc = Segment();
  doc["traceEvents"] = json::object();
  EXPECT_NE(refused(doc).find("traceEvents"), std::string::npos);
  doc = Segment();
  doc["otherData"]["format"] = "expanse-trace-segment/2";
  EXPECT_NE(refused(doc).find("format"), std::string::npos);
  doc = Segment();
  doc["otherData"]["window_end_ms"] = 1796000000000 + kMaxTraceSegmentWindowMs + 1;
  EXPECT_NE(refused(doc).find("window_end_ms"), std::string::npos);
  doc = Segment();
  doc["otherData"]["trigger"].erase("id");
  EXPECT_NE(refused(doc).find("id"), std::string::npos);
  doc = Segment();
  doc["otherData"]["pid"] = 0;
  EXPECT_NE(refused(doc).find("pid"), std::string::npos);
  doc = Segment();
  doc["otherData"]["trigger"]["reason"] = "../x";
  EXPECT_NE(refused(doc).find("reason"), std::string::npos);
  doc = json::array();
  EXPECT_FALSE(refused(doc).empty());
  // Not JSON, and too deep for a segment.
  EXPECT_FALSE(ParseTraceSegmentHeader("{\"traceEvents\": [", "seg", "bad_segment").ok());
  EXPECT_EQ(
      ParseTraceSegmentHeader(std::string(20, '[') + std::string(20, ']'), "seg", "bad_segment")
          .status()
          .reason(),
      "bad_segment");
}

}  // namespace
}  // namespace expanse::wire
