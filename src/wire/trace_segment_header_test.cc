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

// otherData.pc_sampling as the agent writes it (capture/pc_profile.cc), at its deepest.
json Sampled() {
  return json::parse(R"({"state": "sampled", "period": 0, "total_samples": 900,
    "dropped_samples": 2, "hardware_buffer_full": 0, "unkept_samples": 0,
    "stall_reasons": {"selected": 100, "long_scoreboard": 700, "barrier": 60, "a": 1, "b": 2,
                      "c": 3},
    "functions": [
      {"name": "_Z9sgemm_128PfS_", "samples": 800,
       "stall_reasons": {"long_scoreboard": 700, "selected": 100},
       "pcs": [{"cubin_crc": 41, "pc_offset": 512, "samples": 800,
                "stall_reasons": {"long_scoreboard": 700, "selected": 100}}]},
      {"name": "relu", "samples": 60, "stall_reasons": {"barrier": 60}, "pcs": []}]})");
}

TEST(TraceSegmentHeader, BriefsThePcSamplingOfTheWindow) {
  json doc = Segment();
  EXPECT_EQ(ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment")->pc_sampling, "");
  doc["otherData"]["pc_sampling"] = Sampled();
  auto h = ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(json::parse(h->pc_sampling),
            json::parse(R"({"state": "sampled", "total_samples": 900, "dropped_samples": 2,
              "stall_reasons": [["long_scoreboard", 700], ["selected", 100], ["barrier", 60],
                                ["c", 3], ["b", 2]],
              "functions": [{"name": "_Z9sgemm_128PfS_", "samples": 800,
                             "stall": "long_scoreboard"},
                            {"name": "relu", "samples": 60, "stall": "barrier"}]})"));
  doc["otherData"]["pc_sampling"] = {{"state", "restricted"}, {"reason", "RmProfilingAdminOnly=1"}};
  EXPECT_EQ(ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment")->pc_sampling,
            R"({"reason":"RmProfilingAdminOnly=1","state":"restricted"})");
  // Long names are cut, and the brief stays within its bound whatever the names hold.
  json wide = Sampled();
  for (int i = 0; i < 48; ++i) {  // the agent lists at most 50
    wide["functions"].push_back({{"name", std::string(4000, '\x01')},
                                 {"samples", 1},
                                 {"stall_reasons", {{std::string(4000, '\x02'), 1}}},
                                 {"pcs", json::array()}});
    wide["stall_reasons"][std::string(3000, static_cast<char>('\x03' + i % 20))] = 1000 + i;
  }
  doc["otherData"]["pc_sampling"] = wide;
  h = ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LE(h->pc_sampling.size(), kMaxPcSamplingSummaryBytes);
  const json brief = json::parse(h->pc_sampling);
  EXPECT_EQ(brief.at("state"), "sampled");
  EXPECT_EQ(brief.at("stall_reasons").at(0).at(0).get<std::string>(),
            std::string(kMaxPcSamplingNameBytes, '?'))
      << "cut, control characters shown as '?'";
}

TEST(TraceSegmentHeader, RefusesAPcSamplingNotOfTheAgentsShape) {
  const auto refused = [](const json& pc) {
    json doc = Segment();
    doc["otherData"]["pc_sampling"] = pc;
    auto h = ParseTraceSegmentHeader(doc.dump(), "seg", "bad_segment");
    EXPECT_FALSE(h.ok()) << pc.dump();
    return h.ok() ? std::string() : h.status().message();
  };
  EXPECT_NE(refused(json::array()).find("pc_sampling"), std::string::npos);
  EXPECT_NE(refused({{"state", "maybe"}}).find("pc_sampling.state must be"), std::string::npos);
  json pc = Sampled();
  pc["stall_reasons"]["selected"] = -1;
  EXPECT_NE(refused(pc).find("stall_reasons"), std::string::npos);
  pc = Sampled();
  pc["functions"][0]["name"] = 7;
  EXPECT_NE(refused(pc).find("functions[0].name"), std::string::npos);
  pc = Sampled();
  pc["functions"][1]["samples"] = "many";
  EXPECT_NE(refused(pc).find("functions[1].samples"), std::string::npos);
  pc = Sampled();
  pc["total_samples"] = 1.5;
  EXPECT_NE(refused(pc).find("total_samples"), std::string::npos);
  pc = Sampled();
  for (int i = 0; i < 6; ++i)  // past the briefed five, still checked
    pc["functions"].push_back({{"name", "f"}, {"samples", 1}, {"pcs", json::array()}});
  pc["functions"][7]["pcs"] = "none";
  EXPECT_NE(refused(pc).find("functions[7].pcs"), std::string::npos);
  pc = Sampled();
  for (int i = 0; i < 257; ++i)
    pc["stall_reasons"]["r" + std::to_string(i)] = 1;
  EXPECT_NE(refused(pc).find("at most 256"), std::string::npos);
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
