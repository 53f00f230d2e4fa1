#include "cupti/device_plan.h"

#include <gtest/gtest.h>

namespace expanse::cupti {
namespace {

using std::chrono::seconds;

TEST(DevicePlanTest, EscalationIsBoundedAndReturnsToLight) {
  DevicePlan plan({});
  const SteadyTime t0{seconds(1000)};
  EXPECT_EQ(plan.Wanted(t0), CounterSet::kLight);
  EXPECT_TRUE(plan.Escalate(t0, seconds(30)));
  EXPECT_EQ(plan.Wanted(t0 + seconds(29)), CounterSet::kRich);
  EXPECT_EQ(plan.Wanted(t0 + seconds(30)), CounterSet::kLight);
  // A shorter request never cuts a running window short; a longer one extends it, bounded.
  EXPECT_TRUE(plan.Escalate(t0, seconds(100000)));
  EXPECT_TRUE(plan.Escalate(t0 + seconds(1), seconds(5)));
  EXPECT_EQ(plan.Wanted(t0 + seconds(599)), CounterSet::kRich);
  EXPECT_EQ(plan.Wanted(t0 + seconds(600)), CounterSet::kLight);
  plan.Escalate(t0, seconds(60));
  plan.EndEscalation();
  EXPECT_EQ(plan.Wanted(t0), CounterSet::kLight);
}

TEST(DevicePlanTest, ProfilingDisabledKeepsTheLightSet) {
  DevicePlan plan({.escalation_enabled = false});
  const SteadyTime t0{seconds(5)};
  EXPECT_FALSE(plan.Escalate(t0, seconds(30)));
  EXPECT_EQ(plan.Wanted(t0), CounterSet::kLight);
}

TEST(DevicePlanTest, AHeldGpuIsNotTriedUntilResumedThenAtOnce) {
  DevicePlan plan({});
  const SteadyTime t0{seconds(100)};
  plan.Released(t0);
  plan.Hold();
  EXPECT_TRUE(plan.held());
  EXPECT_FALSE(plan.MayTry(t0 + seconds(3600)));
  plan.Resume();
  EXPECT_TRUE(plan.MayTry(t0));  // the backoff of the earlier release is forgotten too
}

TEST(DevicePlanTest, BackoffDoublesUpToTheCapAndStartsOverOnResume) {
  DevicePlan plan({.initial_backoff = std::chrono::milliseconds(5000),
                   .max_backoff = std::chrono::milliseconds(20'000)});
  const SteadyTime t0{seconds(100)};
  EXPECT_TRUE(plan.MayTry(t0));
  plan.Released(t0);
  EXPECT_FALSE(plan.MayTry(t0 + seconds(4)));
  EXPECT_TRUE(plan.MayTry(t0 + seconds(5)));
  plan.Released(t0);
  EXPECT_EQ(plan.current_backoff(), std::chrono::milliseconds(10'000));
  plan.Released(t0);
  plan.Released(t0);
  EXPECT_EQ(plan.current_backoff(), std::chrono::milliseconds(20'000));
  EXPECT_FALSE(plan.MayTry(t0 + seconds(19)));
  plan.Resumed();
  plan.Released(t0);
  EXPECT_EQ(plan.current_backoff(), std::chrono::milliseconds(5000));
}

}  // namespace
}  // namespace expanse::cupti
