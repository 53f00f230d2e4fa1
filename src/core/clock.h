// Clock: the one source of "now" for code whose behaviour depends on time (token expiry, stale
// computes, rate limits), so tests drive time explicitly instead of sleeping.
#ifndef EXPANSE_CORE_CLOCK_H_
#define EXPANSE_CORE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace expanse {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix epoch milliseconds.
  virtual int64_t NowMs() = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Milliseconds since an arbitrary start that never jumps: for deadlines, timeouts and backoff,
// which a wall-clock step (NTP at boot) must neither fire early nor hold back.
class MonotonicClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms) : now_ms_(start_ms) {}
  int64_t NowMs() override { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_ += ms; }
  void Set(int64_t ms) { now_ms_ = ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace expanse

#endif  // EXPANSE_CORE_CLOCK_H_
