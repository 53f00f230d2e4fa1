#include "wire/capture_records.h"

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

using nlohmann::json;

// As libexpanse-agent.so writes it (capture/aggregate_json.cc).
json Aggregate() {
  return json::parse(R"({
    "format": "expanse-capture-aggregate/1", "job_id": "4242", "step_id": "0", "rank": "3",
    "host": "gpu7", "pid": 777, "process_start_ticks": 123, "uid": 1001,
    "window_start_ms": 1796000000000, "window_end_ms": 1796000010000, "devices": [0, 1],
    "kernels": {"count": 30, "gpu_ns": 90000000,
                "top": [{"name": "_Z4gemmv", "count": 20, "gpu_ns": 80000000},
                        {"name": "relu", "count": 9, "gpu_ns": 9000000}],
                "other": {"count": 1, "gpu_ns": 1000000}},
    "memcpy": {"htod": {"count": 10, "bytes": 10485760, "gpu_ns": 1000000},
               "future_direction": {"count": 1}},
    "memset": {"count": 2, "bytes": 64, "gpu_ns": 20},
    "sync": {"device": {"count": 10, "wall_ns": 30000000}},
    "nvtx": {"ranges": [{"name": "step", "count": 10, "wall_ns": 60000000}], "marks": 10},
    "dropped_records": 0})");
}

TEST(CaptureAggregate, DecodesTheAgentsDocumentAndEncodesItBack) {
  auto decoded = DecodeCaptureAggregate(Aggregate(), "agg", "bad_aggregate");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const CaptureAggregateRecord& a = *decoded;
  EXPECT_EQ(a.job_id, "4242");
  EXPECT_EQ(a.rank, "3");
  EXPECT_EQ(a.uid, 1001);
  EXPECT_EQ(a.devices, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(a.top_kernels.size(), 2u);
  EXPECT_EQ(a.top_kernels[0].name, "_Z4gemmv");
  EXPECT_EQ(a.top_kernels[0].ns, 80000000);
  EXPECT_EQ(a.other_kernels.count, 1);
  ASSERT_EQ(a.memcpy.size(), 1u);  // the unknown direction is passed over
  EXPECT_EQ(a.memcpy[0].name, "htod");
  EXPECT_EQ(a.memcpy[0].bytes, 10485760);
  EXPECT_EQ(a.memset.bytes, 64);
  ASSERT_EQ(a.sync.size(), 1u);
  EXPECT_EQ(a.sync[0].name, "device");
  EXPECT_EQ(a.sync[0].ns, 30000000);
  EXPECT_EQ(a.nvtx_ranges[0].name, "step");
  EXPECT_EQ(a.nvtx_marks, 10);

  auto again = DecodeCaptureAggregate(Encode(a), "agg", "bad_aggregate");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Encode(*again), Encode(a));
}

TEST(CaptureAggregate, RefusesEachBadFieldByItsPath) {
  struct Case {
    const char* pointer;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"/format", "expanse-capture-aggregate/9", "agg.format is not"},
      {"/job_id", "../../etc", "agg.job_id"},
      {"/host", "gpu 7", "agg.host"},
      {"/pid", 0, "agg.pid"},
      {"/window_end_ms", 1796000000000, "agg.window_end_ms"},
      {"/window_end_ms", 1796000000000 + kMaxCaptureWindowMs + 1, "agg.window_end_ms"},
      {"/devices", json::array({0, 64}), "agg.devices[1]"},
      {"/kernels/count", 5, "agg.kernels.count is less than the kernels it lists"},
      {"/kernels/gpu_ns", -1, "agg.kernels.gpu_ns"},
      {"/kernels/top/0/name", "bad\u0001name", "agg.kernels.top[0].name"},
      {"/memcpy/htod/bytes", "many", "agg.memcpy.htod.bytes"},
      {"/sync/device/wall_ns", 1.5, "agg.sync.device.wall_ns"},
      {"/nvtx/marks", -3, "agg.nvtx.marks"},
  };
  for (const Case& c : cases) {
    json doc = Aggregate();
    doc[json::json_pointer(c.pointer)] = c.value;
    auto decoded = DecodeCaptureAggregate(doc, "agg", "bad_aggregate");
    ASSERT_FALSE(decoded.ok()) << c.pointer;
    EXPECT_EQ(decoded.status().reason(), "bad_aggregate") << c.pointer;
    EXPECT_NE(decoded.status().message().find(c.message), std::string::npos)
        << c.pointer << ": " << decoded.status().message();
  }
  json too_many = Aggregate();
  for (int i = 0; i < 30; ++i)
    too_many["kernels"]["top"].push_back({{"name", "k"}, {"count", 0}, {"gpu_ns", 0}});
  EXPECT_FALSE(DecodeCaptureAggregate(too_many, "agg", "bad_aggregate").ok());
  EXPECT_FALSE(DecodeCaptureAggregate(json::array(), "agg", "bad_aggregate").ok());
}

}  // namespace
}  // namespace expanse::wire
