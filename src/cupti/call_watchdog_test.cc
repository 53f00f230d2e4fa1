#include "cupti/call_watchdog.h"

#include <future>
#include <string>

#include <gtest/gtest.h>

namespace expanse::cupti {
namespace {

TEST(CallWatchdogTest, FiresOnceWithTheCallThatPassedItsDeadline) {
  ManualClock clock(1000);
  std::vector<std::string> hung;
  CallWatchdog watchdog(clock, std::chrono::milliseconds(500),
                        [&](const char* call) { hung.emplace_back(call); });
  EXPECT_FALSE(watchdog.Check());  // nothing running
  {
    CallWatchdog::Scope scope(watchdog, "cuptiPmSamplingDecodeData");
    clock.Advance(499);
    EXPECT_FALSE(watchdog.Check());
    clock.Advance(1);
    EXPECT_TRUE(watchdog.Check());
    clock.Advance(1000);
    EXPECT_FALSE(watchdog.Check());  // once only
  }
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0], "cuptiPmSamplingDecodeData");
}

TEST(CallWatchdogTest, ACallThatReturnsInTimeIsNotReported) {
  ManualClock clock(0);
  bool fired = false;
  CallWatchdog watchdog(clock, std::chrono::milliseconds(100), [&](const char*) { fired = true; });
  { CallWatchdog::Scope scope(watchdog, "cuInit"); }
  clock.Advance(10'000);
  EXPECT_FALSE(watchdog.Check());
  {
    CallWatchdog::Scope scope(watchdog, "cuDeviceGetCount");  // a new call, a new start
    EXPECT_FALSE(watchdog.Check());
  }
  EXPECT_FALSE(fired);
}

TEST(CallWatchdogTest, ItsThreadReportsAHungCall) {
  ManualClock clock(0);
  std::promise<std::string> reported;
  CallWatchdog watchdog(clock, std::chrono::milliseconds(100),
                        [&](const char* call) { reported.set_value(call); });
  CallWatchdog::Scope scope(watchdog, "cuptiPmSamplingEnable");
  clock.Advance(100);
  watchdog.Start(std::chrono::milliseconds(1));
  EXPECT_EQ(reported.get_future().get(), "cuptiPmSamplingEnable");
}

}  // namespace
}  // namespace expanse::cupti
