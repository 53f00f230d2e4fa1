#include "capture/trace_segment.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::capture {
namespace {

ProcessIdentity Process() {
  ProcessIdentity p;
  p.job_id = "42";
  p.step_id = "0";
  p.rank = "3";
  p.host = "gpu7";
  p.pid = 4242;
  p.start_ticks = 99;
  p.uid = 1001;
  return p;
}

CaptureTrigger Trigger() { return CaptureTrigger{"t-1", 50000, "gpu_idle", {"GPU-a"}}; }

Activity Kernel(uint64_t start_ns, uint64_t end_ns, std::string_view name = "gemm") {
  Activity a;
  a.kind = ActivityKind::kKernel;
  a.start_ns = start_ns;
  a.end_ns = end_ns;
  a.device = 1;
  a.stream = 7;
  a.name = name;
  a.grid = {128, 1, 1};
  a.block = {256, 1, 1};
  return a;
}

TEST(TraceSegment, IsAChromeTraceWithExpanseFactsInOtherData) {
  TraceSegment segment(Process(), Trigger(), 10000);
  segment.Add(Kernel(10'000'500'000, 10'000'900'000));
  Activity copy = Kernel(10'001'000'000, 10'001'200'000);
  copy.kind = ActivityKind::kMemcpy;
  copy.detail = "htod";
  copy.bytes = 1 << 20;
  segment.Add(copy);
  Activity sync;
  sync.kind = ActivityKind::kSync;
  sync.detail = "device";
  sync.start_ns = 10'001'300'000;
  sync.end_ns = 10'002'300'000;
  segment.Add(sync);
  Activity mark;
  mark.kind = ActivityKind::kNvtxMark;
  mark.name = "epoch";
  mark.start_ns = mark.end_ns = 10'003'000'000;
  segment.Add(mark);

  const nlohmann::json doc = nlohmann::json::parse(segment.ToJson(20000));
  const auto& other = doc.at("otherData");
  EXPECT_EQ(other.at("format"), kSegmentFormat);
  EXPECT_EQ(other.at("job_id"), "42");
  EXPECT_EQ(other.at("host"), "gpu7");
  EXPECT_EQ(other.at("pid"), 4242);
  EXPECT_EQ(other.at("window_start_ms"), 10000);
  EXPECT_EQ(other.at("window_end_ms"), 20000);
  EXPECT_EQ(other.at("trigger").at("id"), "t-1");
  EXPECT_EQ(other.at("trigger").at("reason"), "gpu_idle");
  EXPECT_EQ(other.at("events"), 4);
  EXPECT_EQ(other.at("dropped_events"), 0);

  std::vector<nlohmann::json> complete, metadata;
  for (const auto& e : doc.at("traceEvents"))
    (e.at("ph") == "M" ? metadata : complete).push_back(e);
  ASSERT_EQ(complete.size(), 4u);
  const auto& kernel = complete[0];
  EXPECT_EQ(kernel.at("name"), "gemm");
  EXPECT_EQ(kernel.at("cat"), "kernel");
  EXPECT_EQ(kernel.at("ph"), "X");
  EXPECT_DOUBLE_EQ(kernel.at("ts").get<double>(), 10'000'500.0);  // microseconds
  EXPECT_DOUBLE_EQ(kernel.at("dur").get<double>(), 400.0);
  EXPECT_EQ(kernel.at("pid"), 4242);
  EXPECT_EQ(kernel.at("args").at("grid"), nlohmann::json({128, 1, 1}));
  EXPECT_EQ(complete[1].at("name"), "memcpy htod");
  EXPECT_EQ(complete[1].at("args").at("bytes"), 1 << 20);
  EXPECT_EQ(complete[1].at("tid"), kernel.at("tid"));  // same stream, same track
  EXPECT_EQ(complete[2].at("name"), "sync device");
  EXPECT_NE(complete[2].at("tid"), kernel.at("tid"));
  EXPECT_EQ(complete[3].at("ph"), "i");
  // Every track the events use is named.
  std::set<int64_t> named;
  for (const auto& m : metadata) {
    if (m.at("name") == "thread_name")
      named.insert(m.at("tid").get<int64_t>());
  }
  for (const auto& e : complete)
    EXPECT_TRUE(named.count(e.at("tid").get<int64_t>())) << e.dump();
  bool stream_named = false;
  for (const auto& m : metadata) {
    if (m.at("name") == "thread_name" && m.at("args").at("name") == "GPU 1 stream 7")
      stream_named = true;
  }
  EXPECT_TRUE(stream_named);
}

TEST(TraceSegment, KeepsAtMostMaxEventsAndCountsTheRest) {
  TraceSegment segment(Process(), Trigger(), 0, SegmentLimits{3});
  for (int i = 0; i < 5; ++i)
    segment.Add(Kernel(1000 + i, 2000 + i));
  segment.AddDropped(7);
  EXPECT_EQ(segment.events(), 3u);
  EXPECT_EQ(segment.dropped(), 9u);
  const nlohmann::json doc = nlohmann::json::parse(segment.ToJson(1));
  EXPECT_EQ(doc.at("otherData").at("dropped_events"), 9);
}

TEST(TraceSegment, ActivitiesThatEndedBeforeTheWindowAreLeftOut) {
  TraceSegment segment(Process(), Trigger(), 10000);
  segment.Add(Kernel(9'000'000'000, 9'999'999'999));
  segment.Add(Kernel(9'999'000'000, 10'000'000'001));
  EXPECT_EQ(segment.events(), 1u);
}

TEST(TraceSegment, StaysValidJsonWhateverAKernelIsCalled) {
  TraceSegment segment(Process(), Trigger(), 0);
  segment.Add(Kernel(1, 2, "bad\xff\xfe name \"quoted\"\n"));
  const nlohmann::json doc = nlohmann::json::parse(segment.ToJson(1));
  EXPECT_EQ(doc.at("otherData").at("events"), 1);
}

TEST(TraceSegment, FileNameNamesJobHostProcessAndStart) {
  TraceSegment segment(Process(), Trigger(), 1234);
  EXPECT_EQ(segment.FileName(), "seg-42-gpu7-4242-1234.json");
}

}  // namespace
}  // namespace expanse::capture
