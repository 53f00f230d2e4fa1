// Retry timing for uploads: exponential backoff with full jitter, and Retry-After.
#ifndef EXPANSE_OUTBOX_BACKOFF_H_
#define EXPANSE_OUTBOX_BACKOFF_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace expanse::outbox {

// Uniform in [0, 1). Injected so that tests see fixed delays.
using RandomSource = std::function<double()>;

// A RandomSource seeded from std::random_device.
RandomSource DefaultRandomSource();

// "Full jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"): after the n-th
// consecutive failure (n from 0) wait uniformly in [0, min(cap, base * 2^n)). Spreading the
// whole interval keeps a fleet of daemons that lost the server at the same moment from
// returning in lock-step when it comes back.
class Backoff {
 public:
  Backoff(int64_t base_ms, int64_t cap_ms, RandomSource random);

  // The delay before the next try, in ms; counts one more failure.
  int64_t NextDelayMs();
  void Reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  int64_t base_ms_;
  int64_t cap_ms_;
  RandomSource random_;
  int failures_ = 0;
};

// A Retry-After value in the delta-seconds form (RFC 9110 10.2.3), in ms; nullopt for the
// HTTP-date form or anything malformed (the caller then uses its own backoff).
std::optional<int64_t> ParseRetryAfterMs(std::string_view value);

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_BACKOFF_H_
