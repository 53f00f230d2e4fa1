#include "agent/run_history.h"

#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace run_history_test {
namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(RunHistoryTest, CountsStartsAndRunsThatEndedWithoutACleanStop) {
  expanse::testing::TempDir dir;
  const std::string state = dir.path() + "/state";
  RunHistory first = RecordStart(state, 1000);
  EXPECT_EQ(first.starts, 1u);
  EXPECT_EQ(first.unclean_exits, 0u);
  EXPECT_FALSE(first.previous_run_unclean);
  RecordCleanStop(state);

  RunHistory second = RecordStart(state, 2000);
  EXPECT_EQ(second.starts, 2u);
  EXPECT_EQ(second.unclean_exits, 0u);
  // No clean stop: the next start counts this run as unclean, with the generic reason.
  RunHistory third = RecordStart(state, 3000);
  EXPECT_EQ(third.starts, 3u);
  EXPECT_EQ(third.unclean_exits, 1u);
  EXPECT_TRUE(third.previous_run_unclean);
  EXPECT_EQ(third.last_unclean_ms, 3000);
  EXPECT_NE(third.last_unclean_reason.find("without a clean stop"), std::string::npos);

  // What the fatal recorder leaves on the way down is the next start's reason.
  Write(state + "/last-fatal", "uncaught exception: [json.exception.type_error.302] boom");
  RunHistory fourth = RecordStart(state, 4000);
  EXPECT_EQ(fourth.unclean_exits, 2u);
  EXPECT_EQ(fourth.last_unclean_reason, "uncaught exception: [json.exception.type_error.302] boom");
  EXPECT_EQ(fourth.ToJson()["unclean_exits"], 2);
  RecordCleanStop(state);
  RunHistory fifth = RecordStart(state, 5000);
  EXPECT_FALSE(fifth.previous_run_unclean);
  EXPECT_EQ(fifth.unclean_exits, 2u);  // kept from before
  EXPECT_EQ(fifth.last_unclean_ms, 4000);
}

TEST(RunHistoryTest, ADamagedHistoryStartsFromZero) {
  expanse::testing::TempDir dir;
  const std::string state = dir.path();
  for (const char* text : {"{", R"({"starts": "many", "unclean_exits": -1})", "[[[[[[[]]]]]]]",
                           R"({"starts": 18446744073709551615})"}) {
    Write(state + "/run-history.json", text);
    ::unlink((state + "/running").c_str());
    RunHistory h = RecordStart(state, 1);
    EXPECT_EQ(h.starts, 1u) << text;
    EXPECT_EQ(h.unclean_exits, 0u) << text;
  }
}

TEST(RunHistoryDeathTest, AnUncaughtExceptionLeavesItsReason) {
  expanse::testing::TempDir dir;
  const std::string state = dir.path();
  RecordStart(state, 1);
  EXPECT_DEATH(
      {
        InstallFatalRecorder(state);
        // As in the daemon: an exception leaving a thread's function ends the process.
        std::thread([] { throw std::runtime_error("a worker's bad record"); }).join();
      },
      "");
  RunHistory next = RecordStart(state, 2);
  EXPECT_TRUE(next.previous_run_unclean);
  EXPECT_EQ(next.last_unclean_reason, "uncaught exception: a worker's bad record");
}

}  // namespace
}  // namespace run_history_test
}  // namespace expanse::agent
