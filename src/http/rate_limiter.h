// RateLimiter: a token bucket per key (a credential id, a client address), for
// limits such as "5 login attempts per minute per address, bursts of 10".
//
// Each key's bucket holds up to `burst` tokens and refills at `rate_per_second`; a
// request takes one token or is refused. Memory is bounded: at most `max_keys`
// buckets are kept, and the least recently used one is dropped to make room. The
// dropped bucket is normally idle and therefore full, so dropping it changes
// nothing; only under more than max_keys active keys can a key get a fresh bucket
// early.

#ifndef EXPANSE_HTTP_RATE_LIMITER_H_
#define EXPANSE_HTTP_RATE_LIMITER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/clock.h"
#include "core/result.h"

namespace expanse::http {

struct RateLimiterOptions {
  double rate_per_second = 1;  // > 0; e.g. 5.0 / 60 for five per minute
  double burst = 1;            // >= 1: tokens a fresh or idle key may spend at once
  size_t max_keys = 100'000;   // >= 1
};

class RateLimiter {
 public:
  // kInvalidArgument for options outside the ranges above. `clock` must outlive the
  // limiter; a clock that steps backwards only delays refilling.
  static Result<std::unique_ptr<RateLimiter>> Create(RateLimiterOptions options, Clock& clock);

  // Takes a token from `key`'s bucket; false (and nothing taken) when it is empty.
  // Thread-safe.
  bool Allow(std::string_view key);

  // How long until `key` has a token again, rounded up to whole seconds (at least 1),
  // for a Retry-After header after Allow returned false; 0 when it has one now.
  std::chrono::seconds RetryAfter(std::string_view key);

  size_t size() const;  // buckets currently kept

 private:
  struct Bucket {
    std::string key;
    double tokens;
    int64_t updated_ms;
  };
  using BucketList = std::list<Bucket>;  // most recently used first

  RateLimiter(RateLimiterOptions options, Clock& clock) : options_(options), clock_(clock) {}

  // The refilled bucket for `key`, created full and moved to the front. Requires mu_.
  Bucket& Touch(std::string_view key);

  const RateLimiterOptions options_;
  Clock& clock_;
  mutable std::mutex mu_;
  BucketList buckets_;
  std::unordered_map<std::string, BucketList::iterator> index_;
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_RATE_LIMITER_H_
