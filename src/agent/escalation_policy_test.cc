#include "agent/escalation_policy.h"

#include <gtest/gtest.h>

namespace expanse::agent {
namespace escalation_policy_test {
namespace {

using Readings = std::map<std::string, double>;

TEST(EscalationPolicyTest, AGpuGoingIdleTriggersOnceUntilItsWindowPasses) {
  EscalationPolicy policy({});
  EXPECT_TRUE(policy.Observe(0, {{"GPU-a", 90}, {"GPU-b", 80}}).empty());
  const auto first = policy.Observe(1000, {{"GPU-a", 1}, {"GPU-b", 80}});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].uuid, "GPU-a");
  EXPECT_EQ(first[0].reason, "gpu_idle");
  // Busy again and idle again inside the window: quiet.
  EXPECT_TRUE(policy.Observe(2000, {{"GPU-a", 90}}).empty());
  EXPECT_TRUE(policy.Observe(3000, {{"GPU-a", 0}}).empty());
  EXPECT_TRUE(policy.Observe(30'000, {{"GPU-a", 90}}).empty());
  EXPECT_EQ(policy.Observe(62'000, {{"GPU-a", 0}}).size(), 1u);
}

TEST(EscalationPolicyTest, StayingIdleDoesNotTrigger) {
  EscalationPolicy policy({});
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(policy.Observe(i * 1000, {{"GPU-a", 0}}).empty());
}

TEST(EscalationPolicyTest, AThroughputDropTriggersOnlyFromAMeaningfulLevel) {
  EscalationPolicy policy({});
  for (int i = 0; i < 20; ++i)
    policy.Observe(i * 1000, {{"GPU-a", 90}, {"GPU-b", 15}});
  // 90 -> 40: less than half the recent level. 15 -> 6: too low a level to matter.
  const auto hits = policy.Observe(21'000, {{"GPU-a", 40}, {"GPU-b", 6}});
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].uuid, "GPU-a");
  EXPECT_EQ(hits[0].reason, "throughput_drop");
  // A GPU that leaves the job's allocation is forgotten: no stale history on its return.
  policy.Observe(22'000, {});
  EXPECT_TRUE(policy.Observe(23'000, {{"GPU-a", 0}}).empty());
}

}  // namespace
}  // namespace escalation_policy_test
}  // namespace expanse::agent
