// The capture agent's aggregates of a job end to end: ingested in a batch from the compute's
// daemon, summed through the console API.
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"
#include "wire/capture_records.h"

namespace expanse::server {
namespace api_capture_test {
namespace {

using nlohmann::json;

constexpr int64_t kWindow = 10'000;

json Aggregate(const std::string& host, int pid, int index, int gemms, int64_t copied) {
  return {{"format", "expanse-capture-aggregate/1"},
          {"job_id", "77"},
          {"rank", std::to_string(pid % 10)},
          {"host", host},
          {"pid", pid},
          {"uid", 1001},
          {"window_start_ms", api_testing::kStart + index * kWindow},
          {"window_end_ms", api_testing::kStart + (index + 1) * kWindow},
          {"devices", {0}},
          {"kernels",
           {{"count", gemms + 1},
            {"gpu_ns", gemms * 2'000'000 + 500'000},
            {"top",
             {{{"name", "gemm"}, {"count", gemms}, {"gpu_ns", gemms * 2'000'000}},
              {{"name", "relu"}, {"count", 1}, {"gpu_ns", 500'000}}}},
            {"other", {{"count", 0}, {"gpu_ns", 0}}}}},
          {"memcpy", {{"htod", {{"count", 1}, {"bytes", copied}, {"gpu_ns", 1000}}}}},
          {"sync", {{"device", {{"count", 2}, {"wall_ns", 3'000'000}}}}},
          {"nvtx",
           {{"ranges", {{{"name", "step"}, {"count", 1}, {"wall_ns", 9'000'000}}}}, {"marks", 1}}},
          {"dropped_records", 0}};
}

class ApiCaptureTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
  }
  Reply Ingest(int sequence, const json& aggregates) {
    const json batch = {{"version", 1},
                        {"stream", "capture"},
                        {"sequence", sequence},
                        {"capture_aggregates", aggregates}};
    return Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential_));
  }
  Reply Capture(const std::string& query = "") {
    return Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/capture" + query, "",
                Bearer(token_));
  }
  std::string compute_;
  std::string credential_;
};

TEST_F(ApiCaptureTest, AJobsWindowsAreSummedAcrossProcessesAndTime) {
  Reply ingested = Ingest(
      1, {Aggregate("worker1", 101, 0, 10, 1 << 20), Aggregate("worker1", 101, 1, 20, 1 << 20),
          Aggregate("worker2", 202, 0, 30, 2 << 20)});
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  // A redelivery of a window (a new batch after a lost answer) replaces it: counted once.
  Reply again = Ingest(2, json::array({Aggregate("worker1", 101, 1, 20, 1 << 20)}));
  ASSERT_EQ(again.status, 200) << again.body;

  Reply r = Capture();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["windows"], 3);
  EXPECT_EQ(r.body["truncated"], false);
  EXPECT_EQ(r.body["kernels"]["count"], 63);
  EXPECT_EQ(r.body["kernels"]["top"][0],
            (json{{"name", "gemm"}, {"count", 60}, {"gpu_ns", 120'000'000}}));
  EXPECT_EQ(r.body["kernels"]["top"][1]["name"], "relu");
  EXPECT_EQ(r.body["memcpy"]["htod"]["bytes"], 4 << 20);
  EXPECT_EQ(r.body["sync"]["device"], (json{{"count", 6}, {"wall_ns", 9'000'000}}));
  EXPECT_EQ(r.body["nvtx"]["ranges"][0]["count"], 3);
  EXPECT_EQ(r.body["nvtx"]["marks"], 3);
  ASSERT_EQ(r.body["processes"].size(), 2u);
  EXPECT_EQ(r.body["processes"][0]["host"], "worker1");
  EXPECT_EQ(r.body["processes"][0]["windows"], 2);
  EXPECT_EQ(r.body["processes"][0]["rank"], "1");
  ASSERT_EQ(r.body["timeline"].size(), 3u);
  EXPECT_EQ(r.body["timeline"][0]["start_ms"], api_testing::kStart);
  // Each window with its own figures: the longest kernel, copies and time waited.
  const json& latest = r.body["timeline"][2];  // worker1's second window
  EXPECT_EQ(latest["host"], "worker1");
  EXPECT_EQ(latest["kernel_count"], 21);
  EXPECT_EQ(latest["kernel_ns"], 40'500'000);
  EXPECT_EQ(latest["top_kernel"], (json{{"name", "gemm"}, {"count", 20}, {"gpu_ns", 40'000'000}}));
  EXPECT_EQ(latest["memcpy_bytes"], 1 << 20);
  EXPECT_EQ(latest["sync_ns"], 3'000'000);

  // A time range keeps the windows overlapping it.
  Reply later = Capture("?from=" + std::to_string(api_testing::kStart + kWindow));
  ASSERT_EQ(later.status, 200) << later.body;
  EXPECT_EQ(later.body["windows"], 1);
  EXPECT_EQ(later.body["kernels"]["top"][0]["count"], 20);
  EXPECT_EQ(Capture("?from=5&to=5").status, 400);
}

TEST_F(ApiCaptureTest, ABadAggregateRefusesTheBatchNamingTheField) {
  json bad = Aggregate("worker1", 101, 0, 10, 1);
  bad["kernels"]["count"] = 1;  // fewer than it lists
  Reply r = Ingest(1, {Aggregate("worker1", 101, 1, 10, 1), bad});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.dump().find("batch.capture_aggregates[1].kernels.count"), std::string::npos)
      << r.body;
  Reply none = Capture();
  ASSERT_EQ(none.status, 200);
  EXPECT_EQ(none.body["windows"], 0);
}

// Each figure is bounded on intake, but ten windows of the largest ones add past int64: the
// sums stop at its maximum (neither wrapped negative nor undefined), a window's own figures stay.
TEST_F(ApiCaptureTest, SumsOfTheLargestFiguresStopAtTheInt64Maximum) {
  constexpr int64_t kMaxNs = wire::kMaxCaptureCount * 1000;
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  json windows = json::array();
  for (int i = 0; i < 10; ++i) {
    json w = Aggregate("worker1", 101, i, 1, kMaxNs);
    w["kernels"] = {
        {"count", wire::kMaxCaptureCount},
        {"gpu_ns", kMaxNs},
        {"top", {{{"name", "gemm"}, {"count", wire::kMaxCaptureCount}, {"gpu_ns", kMaxNs}}}},
        {"other", {{"count", 0}, {"gpu_ns", 0}}}};
    w["sync"]["device"]["wall_ns"] = kMaxNs;
    w["nvtx"]["marks"] = wire::kMaxCaptureCount;
    w["dropped_records"] = wire::kMaxCaptureCount;
    windows.push_back(std::move(w));
  }
  Reply ingested = Ingest(1, windows);
  ASSERT_EQ(ingested.status, 200) << ingested.body;

  Reply r = Capture();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["windows"], 10);
  EXPECT_EQ(r.body["kernels"]["count"], wire::kMaxCaptureCount * 10);  // still within int64
  EXPECT_EQ(r.body["kernels"]["gpu_ns"], kInt64Max);
  EXPECT_EQ(r.body["kernels"]["top"][0]["gpu_ns"], kInt64Max);
  EXPECT_EQ(r.body["memcpy"]["htod"]["bytes"], kInt64Max);
  EXPECT_EQ(r.body["sync"]["device"]["wall_ns"], kInt64Max);
  EXPECT_EQ(r.body["nvtx"]["marks"], wire::kMaxCaptureCount * 10);
  EXPECT_EQ(r.body["dropped_records"], wire::kMaxCaptureCount * 10);
  ASSERT_EQ(r.body["processes"].size(), 1u);
  EXPECT_EQ(r.body["processes"][0]["kernel_ns"], kInt64Max);
  ASSERT_EQ(r.body["timeline"].size(), 10u);
  EXPECT_EQ(r.body["timeline"][9]["kernel_ns"], kMaxNs);
  EXPECT_EQ(r.body["timeline"][9]["memcpy_bytes"], kMaxNs);
}

// Names are the job's to choose: past 10,000 distinct ones, kernels are summed in "other" and
// ranges in "other_ranges", so made-up names cost the summary no more than that.
TEST_F(ApiCaptureTest, NamesPastTheDistinctBoundAreSummedTogether) {
  json aggregates = json::array();
  for (int index = 0; index < 520; ++index) {
    json window = Aggregate("gpu01", 4242, index, 1, 0);
    json kernels = json::array(), ranges = json::array();
    for (int k = 0; k < 20; ++k) {
      const std::string name = "k" + std::to_string(index * 20 + k);
      kernels.push_back({{"name", name}, {"count", 1}, {"gpu_ns", 100}});
      ranges.push_back({{"name", "r" + name}, {"count", 1}, {"wall_ns", 10}});
    }
    window["kernels"]["top"] = kernels;
    window["kernels"]["count"] = 20;
    window["kernels"]["gpu_ns"] = 2000;
    window["nvtx"]["ranges"] = ranges;
    aggregates.push_back(std::move(window));
  }
  for (size_t first = 0; first < aggregates.size(); first += 100) {
    json part(json::value_t::array);
    for (size_t i = first; i < first + 100 && i < aggregates.size(); ++i)
      part.push_back(aggregates[i]);
    ASSERT_EQ(Ingest(static_cast<int>(first / 100) + 1, part).status, 200);
  }
  const Reply r = Capture();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["windows"], 520);
  EXPECT_EQ(r.body["kernels"]["count"], 520 * 20);
  EXPECT_EQ(r.body["kernels"]["other"]["count"], 520 * 20 - 10'000);  // the 400 names past it
  EXPECT_EQ(r.body["kernels"]["other"]["gpu_ns"], (520 * 20 - 10'000) * 100);
  EXPECT_EQ(r.body["nvtx"]["other_ranges"]["count"], 520 * 20 - 10'000);
  EXPECT_EQ(r.body["nvtx"]["ranges"].size(), 20u);
}

TEST_F(ApiCaptureTest, AJobWithoutCaptureHasAnEmptySummary) {
  Reply r = Capture();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["windows"], 0);
  EXPECT_EQ(r.body["kernels"]["top"], json::array());
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/capture", "", {}).status, 401);
}

}  // namespace
}  // namespace api_capture_test
}  // namespace expanse::server
