#include "cupti/call_watchdog.h"

#include <utility>

namespace expanse::cupti {

CallWatchdog::CallWatchdog(Clock& clock, std::chrono::milliseconds deadline,
                           std::function<void(const char*)> on_hung)
    : clock_(clock), deadline_(deadline), on_hung_(std::move(on_hung)) {}

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

CallWatchdog::Scope::Scope(CallWatchdog& watchdog, const char* call) : watchdog_(watchdog) {
  watchdog_.started_ms_.store(watchdog_.clock_.NowMs());
  watchdog_.call_.store(call);
}

CallWatchdog::Scope::~Scope() { watchdog_.call_.store(nullptr); }

bool CallWatchdog::Check() {
  const char* call = call_.load();
  if (call == nullptr || fired_.load())
    return false;
  if (clock_.NowMs() - started_ms_.load() < deadline_.count())
    return false;
  // The same call may have finished between the loads; it is still the one that overran.
  fired_.store(true);
  on_hung_(call);
  return true;
}

void CallWatchdog::Start(std::chrono::milliseconds poll) {
  thread_ = std::thread([this, poll] {
    std::unique_lock lock(mu_);
    while (!stop_cv_.wait_for(lock, poll, [this] { return stopping_; })) {
      lock.unlock();
      Check();
      lock.lock();
    }
  });
}

}  // namespace expanse::cupti
