#include "http/rate_limiter.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::http {
namespace {

using ::testing::HasSubstr;

class RateLimiterTest : public ::testing::Test {
 protected:
  std::unique_ptr<RateLimiter> Make(double rate, double burst, size_t max_keys = 100) {
    Result<std::unique_ptr<RateLimiter>> limiter = RateLimiter::Create(
        {.rate_per_second = rate, .burst = burst, .max_keys = max_keys}, clock_);
    EXPECT_TRUE(limiter.ok()) << limiter.status();
    return limiter.ok() ? *std::move(limiter) : nullptr;
  }
  ManualClock clock_{1'700'000'000'000};
};

TEST_F(RateLimiterTest, AllowsBurstThenRefuses) {
  auto limiter = Make(1, 3);
  EXPECT_TRUE(limiter->Allow("ip:10.0.0.1"));
  EXPECT_TRUE(limiter->Allow("ip:10.0.0.1"));
  EXPECT_TRUE(limiter->Allow("ip:10.0.0.1"));
  EXPECT_FALSE(limiter->Allow("ip:10.0.0.1"));
  EXPECT_FALSE(limiter->Allow("ip:10.0.0.1"));
}

TEST_F(RateLimiterTest, RefillsAtTheRate) {
  auto limiter = Make(2, 2);  // one token every 500 ms
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(499);
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(1);
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(60'000);  // long idle: refills to burst, not beyond
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_FALSE(limiter->Allow("k"));
}

TEST_F(RateLimiterTest, SlowRatesRefillExactlyOnTime) {
  auto limiter = Make(5.0 / 60, 1);  // five per minute
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(11'999);
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(1);
  EXPECT_TRUE(limiter->Allow("k"));
}

TEST_F(RateLimiterTest, KeysAreIndependent) {
  auto limiter = Make(1, 1);
  EXPECT_TRUE(limiter->Allow("a"));
  EXPECT_FALSE(limiter->Allow("a"));
  EXPECT_TRUE(limiter->Allow("b"));
  EXPECT_TRUE(limiter->Allow(std::string("a\0x", 3)));
}

TEST_F(RateLimiterTest, RetryAfterRoundsUpToWholeSeconds) {
  auto limiter = Make(0.25, 1);  // one token every 4 s
  EXPECT_EQ(limiter->RetryAfter("k"), std::chrono::seconds(0));
  EXPECT_TRUE(limiter->Allow("k"));
  EXPECT_EQ(limiter->RetryAfter("k"), std::chrono::seconds(4));
  clock_.Advance(2'500);
  EXPECT_EQ(limiter->RetryAfter("k"), std::chrono::seconds(2));
  clock_.Advance(1'400);
  EXPECT_EQ(limiter->RetryAfter("k"), std::chrono::seconds(1));
  clock_.Advance(100);
  EXPECT_EQ(limiter->RetryAfter("k"), std::chrono::seconds(0));
}

TEST_F(RateLimiterTest, MemoryIsBoundedByEvictingLeastRecentlyUsed) {
  auto limiter = Make(1, 1, /*max_keys=*/3);
  EXPECT_TRUE(limiter->Allow("a"));
  EXPECT_TRUE(limiter->Allow("b"));
  EXPECT_TRUE(limiter->Allow("c"));
  EXPECT_FALSE(limiter->Allow("a"));  // a is now the most recently used
  EXPECT_TRUE(limiter->Allow("d"));   // evicts b
  EXPECT_EQ(limiter->size(), 3u);
  EXPECT_FALSE(limiter->Allow("a"));  // a kept its empty bucket
  EXPECT_FALSE(limiter->Allow("c"));
  EXPECT_TRUE(limiter->Allow("b"));  // b starts over
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(limiter->Allow("key" + std::to_string(i)));
  }
  EXPECT_EQ(limiter->size(), 3u);
}

TEST_F(RateLimiterTest, ClockSteppingBackDoesNotRefillOrLockOut) {
  auto limiter = Make(1, 1);
  EXPECT_TRUE(limiter->Allow("k"));
  clock_.Advance(-3'600'000);
  EXPECT_FALSE(limiter->Allow("k"));
  clock_.Advance(1'000);
  EXPECT_TRUE(limiter->Allow("k"));
}

TEST_F(RateLimiterTest, RejectsBadOptions) {
  for (const RateLimiterOptions& options : {
           RateLimiterOptions{.rate_per_second = 0, .burst = 1, .max_keys = 1},
           RateLimiterOptions{.rate_per_second = -1, .burst = 1, .max_keys = 1},
           RateLimiterOptions{.rate_per_second = std::nan(""), .burst = 1, .max_keys = 1},
           RateLimiterOptions{.rate_per_second = 1, .burst = 0.5, .max_keys = 1},
           RateLimiterOptions{.rate_per_second = 1, .burst = 1, .max_keys = 0},
       }) {
    const auto limiter = RateLimiter::Create(options, clock_);
    ASSERT_FALSE(limiter.ok());
    EXPECT_EQ(limiter.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(limiter.status().message(), HasSubstr("rate limiter: "));
  }
}

}  // namespace
}  // namespace expanse::http
