#include "pystack/stack_aggregator.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::pystack {
namespace stack_aggregator_test {
namespace {

using nlohmann::json;

// The records as the ingest batch writes them, which is what these tests state.
json Json(const std::vector<wire::StackRecord>& records) {
  json out = json::array();
  for (const wire::StackRecord& r : records)
    out.push_back(wire::Encode(r));
  return out;
}

constexpr int64_t kT0 = 1700000040000;  // a window boundary for 60 s windows

ThreadStack Thread(ThreadState state, std::vector<std::string> functions) {
  ThreadStack thread;
  thread.state = state;
  for (std::string& function : functions)
    thread.frames.push_back({"train.py", std::move(function), 10});
  return thread;
}

ProcessStacks Process(std::vector<ThreadStack> threads) {
  ProcessStacks stacks;
  stacks.pid = 100;
  stacks.threads = std::move(threads);
  return stacks;
}

TEST(StackAggregatorTest, CountsPerWindowStackStateAndGpuIdle) {
  StackAggregator aggregator;
  const ProcessStacks sample = Process({Thread(ThreadState::kHoldsGil, {"main", "step"}),
                                        Thread(ThreadState::kIdle, {"main", "wait"})});
  aggregator.Add("42", "gpu-node1", kT0 + 1000, sample, false);
  aggregator.Add("42", "gpu-node1", kT0 + 2000, sample, false);
  aggregator.Add("42", "gpu-node1", kT0 + 3000, sample, true);

  EXPECT_EQ(Json(aggregator.TakeClosed(kT0 + 59999)), json::array());  // still open
  const json entries = Json(aggregator.TakeClosed(kT0 + 60000));
  const json expected = json::parse(R"([
    {"job_id": "42", "host": "gpu-node1", "window_start_ms": 1700000040000,
     "window_end_ms": 1700000100000, "folded": "train.py:main:10;train.py:step:10",
     "thread_state": "gil", "count": 2, "gpu_idle": false},
    {"job_id": "42", "host": "gpu-node1", "window_start_ms": 1700000040000,
     "window_end_ms": 1700000100000, "folded": "train.py:main:10;train.py:step:10",
     "thread_state": "gil", "count": 1, "gpu_idle": true},
    {"job_id": "42", "host": "gpu-node1", "window_start_ms": 1700000040000,
     "window_end_ms": 1700000100000, "folded": "train.py:main:10;train.py:wait:10",
     "thread_state": "idle", "count": 2, "gpu_idle": false},
    {"job_id": "42", "host": "gpu-node1", "window_start_ms": 1700000040000,
     "window_end_ms": 1700000100000, "folded": "train.py:main:10;train.py:wait:10",
     "thread_state": "idle", "count": 1, "gpu_idle": true}
  ])");
  EXPECT_EQ(entries, expected);
  EXPECT_EQ(aggregator.open_windows(), 0u);
  EXPECT_EQ(aggregator.bytes_held(), 0u);
  EXPECT_EQ(aggregator.stats().threads_counted, 6u);
}

TEST(StackAggregatorTest, WindowsAlignToTheirLengthAndCloseInOrder) {
  StackAggregator aggregator(StackAggregatorOptions{.window_ms = 10000});
  const ProcessStacks sample = Process({Thread(ThreadState::kRunning, {"f"})});
  aggregator.Add("1", "h", kT0 + 9999, sample, false);
  aggregator.Add("1", "h", kT0 + 10000, sample, false);
  aggregator.Add("2", "h", kT0 + 25000, sample, false);
  EXPECT_EQ(aggregator.open_windows(), 3u);

  const json closed = Json(aggregator.TakeClosed(kT0 + 20000));
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0]["window_start_ms"], kT0);
  EXPECT_EQ(closed[0]["window_end_ms"], kT0 + 10000);
  EXPECT_EQ(closed[1]["window_start_ms"], kT0 + 10000);
  EXPECT_EQ(closed[1]["thread_state"], "running");

  const json rest = Json(aggregator.TakeAll());
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0]["job_id"], "2");
  EXPECT_EQ(rest[0]["window_start_ms"], kT0 + 20000);
}

TEST(StackAggregatorTest, WindowsCanStartAtAnOrigin) {
  // A live burst's window: from the controller's trigger time, off the minute grid.
  StackAggregator aggregator(
      StackAggregatorOptions{.window_ms = 20000, .window_origin_ms = kT0 + 1234});
  const ProcessStacks sample = Process({Thread(ThreadState::kRunning, {"f"})});
  aggregator.Add("1", "h", kT0 + 1234, sample, false);
  aggregator.Add("1", "h", kT0 + 21233, sample, false);
  aggregator.Add("1", "h", kT0 + 21234, sample, false);  // the next window
  const json all = Json(aggregator.TakeAll());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["window_start_ms"], kT0 + 1234);
  EXPECT_EQ(all[0]["window_end_ms"], kT0 + 21234);
  EXPECT_EQ(all[0]["count"], 2);
  EXPECT_EQ(all[1]["window_start_ms"], kT0 + 21234);
}

TEST(StackAggregatorTest, SamplesForAWindowAlreadyHandedOutAreDropped) {
  StackAggregator aggregator;
  const ProcessStacks sample = Process({Thread(ThreadState::kRunning, {"f"})});
  aggregator.Add("1", "h", kT0 + 1000, sample, false);
  ASSERT_EQ(Json(aggregator.TakeClosed(kT0 + 60000)).size(), 1u);
  // The clock stepped back: ingest would replace the uploaded count with this one.
  aggregator.Add("1", "h", kT0 + 2000, sample, false);
  EXPECT_EQ(aggregator.stats().threads_dropped_late, 1u);
  EXPECT_EQ(Json(aggregator.TakeAll()), json::array());

  // A shutdown flush counts too.
  aggregator.Add("1", "h", kT0 + 61000, sample, false);
  ASSERT_EQ(Json(aggregator.TakeAll()).size(), 1u);
  aggregator.Add("1", "h", kT0 + 62000, sample, false);
  EXPECT_EQ(aggregator.stats().threads_dropped_late, 2u);
}

TEST(StackAggregatorTest, ThreadsWithoutFramesAreSkippedAndCounted) {
  StackAggregator aggregator;
  aggregator.Add("1", "h", kT0, Process({Thread(ThreadState::kIdle, {})}), false);
  aggregator.Add("1", "h", kT0,
                 Process({Thread(ThreadState::kIdle, {}), Thread(ThreadState::kUnknown, {"f"})}),
                 false);
  EXPECT_EQ(aggregator.stats().threads_without_frames, 2u);
  const json all = Json(aggregator.TakeAll());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["thread_state"], "");
  EXPECT_EQ(all[0]["count"], 1);
}

TEST(StackAggregatorTest, DistinctStacksBeyondTheBoundCountAsOther) {
  StackAggregator aggregator(StackAggregatorOptions{.max_stacks_per_job_window = 2});
  for (const char* function : {"a", "b", "c", "d", "a"}) {
    aggregator.Add("1", "h", kT0, Process({Thread(ThreadState::kRunning, {function})}), false);
  }
  // Another job has its own bound.
  aggregator.Add("2", "h", kT0, Process({Thread(ThreadState::kRunning, {"c"})}), false);

  const json all = Json(aggregator.TakeAll());
  std::vector<std::string> rows;
  for (const json& entry : all) {
    rows.push_back(entry["job_id"].get<std::string>() + " " + entry["folded"].get<std::string>() +
                   " " + std::to_string(entry["count"].get<int>()));
  }
  EXPECT_THAT(rows, ::testing::ElementsAre("1 <other>:<other>:0 2", "1 train.py:a:10 2",
                                           "1 train.py:b:10 1", "2 train.py:c:10 1"));
  EXPECT_EQ(aggregator.stats().threads_into_other, 2u);
  EXPECT_EQ(aggregator.stats().threads_counted, 6u);
}

TEST(StackAggregatorTest, JobsBeyondTheBoundAreDroppedAndCounted) {
  StackAggregator aggregator(StackAggregatorOptions{.max_jobs_per_window = 2});
  const ProcessStacks sample =
      Process({Thread(ThreadState::kRunning, {"f"}), Thread(ThreadState::kRunning, {"g"})});
  aggregator.Add("1", "h", kT0, sample, false);
  aggregator.Add("2", "h", kT0, sample, false);
  aggregator.Add("3", "h", kT0, sample, false);
  aggregator.Add("1", "h", kT0, sample, false);  // known jobs still count
  EXPECT_EQ(aggregator.stats().threads_dropped_jobs, 2u);
  EXPECT_EQ(Json(aggregator.TakeAll()).size(), 4u);
}

TEST(StackAggregatorTest, ByteBudgetSendsNewStacksToOther) {
  StackAggregator aggregator(StackAggregatorOptions{.max_bytes = 1000});
  for (int i = 0; i < 20; ++i) {
    aggregator.Add("1", "h", kT0,
                   Process({Thread(ThreadState::kRunning, {"function_" + std::to_string(i)})}),
                   false);
  }
  EXPECT_LE(aggregator.bytes_held(), 1000u + 200u);  // plus the one <other> entry
  EXPECT_GT(aggregator.stats().threads_into_other, 0u);
  uint64_t total = 0;
  for (const json& entry : Json(aggregator.TakeAll()))
    total += entry["count"].get<uint64_t>();
  EXPECT_EQ(total, 20u);
}

TEST(StackAggregatorTest, TooManyOpenWindowsDiscardsTheOldest) {
  StackAggregator aggregator(StackAggregatorOptions{.window_ms = 1000, .max_open_windows = 2});
  const ProcessStacks sample = Process({Thread(ThreadState::kRunning, {"f"})});
  aggregator.Add("1", "h", kT0, sample, false);
  aggregator.Add("1", "h", kT0 + 1000, sample, false);
  aggregator.Add("1", "h", kT0 + 2000, sample, false);
  EXPECT_EQ(aggregator.stats().windows_discarded, 1u);
  // The discarded window stays closed.
  aggregator.Add("1", "h", kT0 + 500, sample, false);
  EXPECT_EQ(aggregator.stats().threads_dropped_late, 1u);
  const json all = Json(aggregator.TakeAll());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["window_start_ms"], kT0 + 1000);
}

TEST(StackAggregatorTest, DeepStacksAreFoldedWithinTheIngestLimit) {
  std::vector<std::string> functions(5000, std::string(20, 'r'));
  functions.back() = "leaf";
  StackAggregator aggregator;
  aggregator.Add("1", "h", kT0, Process({Thread(ThreadState::kRunning, functions)}), false);
  const json all = Json(aggregator.TakeAll());
  ASSERT_EQ(all.size(), 1u);
  const std::string folded = all[0]["folded"];
  EXPECT_LE(folded.size(), 16384u);
  EXPECT_TRUE(folded.ends_with(";train.py:leaf:10")) << folded.substr(folded.size() - 40);
}

TEST(StackAggregatorTest, SamplesBeforeTheFirstWindowAfterTheEpochAreDropped) {
  StackAggregator aggregator;
  aggregator.Add("1", "h", 59999, Process({Thread(ThreadState::kRunning, {"f"})}), false);
  EXPECT_EQ(aggregator.stats().threads_dropped_late, 1u);
  EXPECT_EQ(Json(aggregator.TakeAll()), json::array());
}

}  // namespace
}  // namespace stack_aggregator_test
}  // namespace expanse::pystack
