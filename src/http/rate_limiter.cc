#include "http/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace expanse::http {

namespace {
// Refill arithmetic in doubles can land a hair below a whole token (12 s at 5/60 per
// second is 0.99999...); this much short of a token still counts as one.
constexpr double kTokenSlack = 1e-9;
}  // namespace

Result<std::unique_ptr<RateLimiter>> RateLimiter::Create(RateLimiterOptions options, Clock& clock) {
  // Written as !(x > 0) so that NaN is refused too.
  if (!(options.rate_per_second > 0) || !std::isfinite(options.rate_per_second)) {
    return InvalidArgumentError("rate limiter: rate_per_second must be a positive number, not " +
                                std::to_string(options.rate_per_second));
  }
  if (!(options.burst >= 1) || !std::isfinite(options.burst)) {
    return InvalidArgumentError("rate limiter: burst must be at least 1, not " +
                                std::to_string(options.burst));
  }
  if (options.max_keys < 1) {
    return InvalidArgumentError("rate limiter: max_keys must be at least 1");
  }
  return std::unique_ptr<RateLimiter>(new RateLimiter(options, clock));
}

RateLimiter::Bucket& RateLimiter::Touch(std::string_view key) {
  const int64_t now_ms = clock_.NowMs();
  const std::string key_string(key);
  const auto found = index_.find(key_string);
  if (found == index_.end()) {
    if (buckets_.size() >= options_.max_keys) {
      index_.erase(buckets_.back().key);
      buckets_.pop_back();
    }
    buckets_.push_front({key_string, options_.burst, now_ms});
    index_.emplace(key_string, buckets_.begin());
    return buckets_.front();
  }
  buckets_.splice(buckets_.begin(), buckets_, found->second);
  Bucket& bucket = buckets_.front();
  if (now_ms > bucket.updated_ms) {
    const double elapsed_s = static_cast<double>(now_ms - bucket.updated_ms) / 1000.0;
    bucket.tokens = std::min(options_.burst, bucket.tokens + elapsed_s * options_.rate_per_second);
  }
  // A clock that stepped back restarts the refill from the earlier time instead of
  // withholding tokens until it catches up again.
  bucket.updated_ms = now_ms;
  return bucket;
}

bool RateLimiter::Allow(std::string_view key) {
  const std::lock_guard<std::mutex> lock(mu_);
  Bucket& bucket = Touch(key);
  if (bucket.tokens < 1 - kTokenSlack) {
    return false;
  }
  bucket.tokens = std::max(0.0, bucket.tokens - 1);
  return true;
}

std::chrono::seconds RateLimiter::RetryAfter(std::string_view key) {
  const std::lock_guard<std::mutex> lock(mu_);
  const Bucket& bucket = Touch(key);
  if (bucket.tokens >= 1 - kTokenSlack) {
    return std::chrono::seconds(0);
  }
  const double wait_s = (1 - bucket.tokens) / options_.rate_per_second;
  return std::chrono::seconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s))));
}

size_t RateLimiter::size() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

}  // namespace expanse::http
