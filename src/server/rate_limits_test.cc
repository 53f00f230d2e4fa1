// The default per-credential limit against what one compute's controller really sends: every
// worker's batch each flush, one at a time, never refused at the largest compute one controller
// carries; a flood from one credential is.
#include <gtest/gtest.h>

#include "core/clock.h"
#include "server/routes.h"

namespace expanse::server {
namespace rate_limits_test {
namespace {

// Requests of one credential at `per_second` for `seconds`, evenly spaced; how many were refused.
int Refused(RateLimits& limits, ManualClock& clock, int per_second, int seconds) {
  int refused = 0;
  const int64_t step_us = 1'000'000 / per_second;
  int64_t elapsed_us = 0;
  for (int i = 0; i < per_second * seconds; ++i) {
    const int64_t next_us = elapsed_us + step_us;
    clock.Advance(next_us / 1000 - elapsed_us / 1000);
    elapsed_us = next_us;
    if (!limits.per_credential->Allow("exp_cc_hash"))
      ++refused;
  }
  return refused;
}

// 2,000 workers flushing every 10 s, the heartbeat and a few segments: about 205 requests a
// second for ten minutes, none refused. The old default (20 a second) refused most of them.
TEST(RateLimitsTest, AControllerOfTwoThousandWorkersIsNeverThrottled) {
  ManualClock clock(1'700'000'000'000);
  Result<RateLimits> limits = RateLimits::Default(clock);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(Refused(*limits, clock, 205, 600), 0);

  ManualClock old_clock(1'700'000'000'000);
  Result<RateLimits> old = RateLimits::Default(old_clock, 20);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_GT(Refused(*old, old_clock, 205, 600), 100'000);
}

// A leaked credential flooding at 2,000 a second gets its burst, then the sustained rate.
TEST(RateLimitsTest, AFloodFromOneCredentialIsHeldToTheRate) {
  ManualClock clock(1'700'000'000'000);
  Result<RateLimits> limits = RateLimits::Default(clock);
  ASSERT_TRUE(limits.ok()) << limits.status();
  const int refused = Refused(*limits, clock, 2000, 60);
  const double allowed = 2000.0 * 60 - refused;
  const double rate = RateLimits::kDefaultCredentialRequestsPerSecond;
  EXPECT_LE(allowed, rate * 60 + 5 * rate + 1) << "the rate plus one burst of 5 s";
  EXPECT_GE(allowed, rate * 60);
}

}  // namespace
}  // namespace rate_limits_test
}  // namespace expanse::server
