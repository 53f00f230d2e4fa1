// CallWatchdog: a deadline on each CUDA or CUPTI call the helper makes, like the NVML guard in
// the daemon. A driver call that never returns cannot be cancelled, so the only safe answer is
// to report which call hung and end the helper; its parent restarts it with backoff. The
// helper makes its driver calls from one thread, so one "current call" slot is enough.
//
// Check() does the work for a given time, so tests drive it with a ManualClock; Start() runs it
// every `poll` on a thread of its own.
#ifndef EXPANSE_CUPTI_CALL_WATCHDOG_H_
#define EXPANSE_CUPTI_CALL_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "core/clock.h"

namespace expanse::cupti {

class CallWatchdog {
 public:
  // `on_hung` runs once, with the call's name, from Check()'s thread.
  CallWatchdog(Clock& clock, std::chrono::milliseconds deadline,
               std::function<void(const char* call)> on_hung);
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // Marks `call` (a string literal) as running until the scope ends.
  class Scope {
   public:
    Scope(CallWatchdog& watchdog, const char* call);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallWatchdog& watchdog_;
  };

  // Fires `on_hung` when the running call has passed its deadline; returns whether it fired.
  bool Check();
  void Start(std::chrono::milliseconds poll);
  std::chrono::milliseconds deadline() const { return deadline_; }

 private:
  Clock& clock_;
  const std::chrono::milliseconds deadline_;
  std::function<void(const char*)> on_hung_;
  std::atomic<const char*> call_{nullptr};
  std::atomic<int64_t> started_ms_{0};
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CALL_WATCHDOG_H_
