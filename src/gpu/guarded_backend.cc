#include "gpu/guarded_backend.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace expanse::gpu {

struct GuardedBackend::Lane {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> task;  // set by the caller, cleared by the worker when it starts
  bool busy = false;           // a task is queued or running
  bool stop = false;
  const char* current = "";
  std::chrono::steady_clock::time_point started;
  std::chrono::milliseconds timeout{0};  // the running call's deadline, from `started`
  std::thread worker;

  static void Run(const std::shared_ptr<Lane>& lane) {
    std::unique_lock lock(lane->mu);
    for (;;) {
      lane->cv.wait(lock, [&] { return lane->stop || lane->task; });
      if (!lane->task)
        return;  // stopping and idle
      std::function<void()> task = std::move(lane->task);
      lane->task = nullptr;
      lock.unlock();
      task();
      lock.lock();
      lane->busy = false;
      lane->cv.notify_all();
      if (lane->stop)
        return;
    }
  }

  static std::shared_ptr<Lane> Start() {
    auto lane = std::make_shared<Lane>();
    lane->worker = std::thread([lane] { Run(lane); });
    return lane;
  }

  // Joins an idle worker; detaches one stuck in a call (see the header).
  static void Stop(const std::shared_ptr<Lane>& lane) {
    bool stuck;
    {
      std::lock_guard lock(lane->mu);
      lane->stop = true;
      stuck = lane->busy;
      lane->cv.notify_all();
    }
    if (stuck) {
      lane->worker.detach();
    } else {
      lane->worker.join();
    }
  }
};

GuardedBackend::GuardedBackend(std::unique_ptr<Backend> backend, std::chrono::milliseconds timeout)
    : name_(backend->Name()),
      backend_(std::move(backend)),
      timeout_(timeout),
      fast_(Lane::Start()),
      slow_(Lane::Start()) {}

GuardedBackend::~GuardedBackend() {
  Lane::Stop(fast_);
  Lane::Stop(slow_);
}

template <typename T>
Result<T> GuardedBackend::Call(Lane& lane, const char* what,
                               std::function<Result<T>(Backend&)> fn) {
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::optional<Result<T>> value;
  };
  auto slot = std::make_shared<Slot>();
  const std::chrono::milliseconds timeout = timeout_;
  std::unique_lock lock(lane.mu);
  if (lane.busy) {
    const auto blocked =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - lane.started);
    return UnavailableError(name_ + " call " + lane.current + " has been blocked for " +
                            std::to_string(blocked.count()) + " s (driver hung?); skipping " +
                            what + " until it returns")
        .WithReason("gpu_call_blocked");
  }
  lane.busy = true;
  lane.current = what;
  lane.started = Clock::now();
  lane.timeout = timeout;
  // The task keeps the backend and the slot alive even if this caller gives up on it.
  lane.task = [backend = backend_, slot, fn = std::move(fn), lane_ptr = &lane] {
    Result<T> value = fn(*backend);
    std::lock_guard inner(lane_ptr->mu);
    slot->value.emplace(std::move(value));
  };
  lane.cv.notify_all();
  // Waiting for !busy as well means the lane is free again when the caller returns.
  const bool finished =
      lane.cv.wait_for(lock, timeout, [&] { return slot->value.has_value() && !lane.busy; });
  if (!finished) {
    return DeadlineExceededError(name_ + " call " + what + " did not return within " +
                                 std::to_string(timeout.count()) +
                                 " ms (driver hung?); GPU readings pause until it does")
        .WithReason("gpu_call_hung");
  }
  return std::move(*slot->value);
}

Result<Inventory> GuardedBackend::ReadInventory() {
  return Call<Inventory>(*fast_, "ReadInventory", [](Backend& b) { return b.ReadInventory(); });
}

Result<std::vector<GpuReading>> GuardedBackend::ReadFast() {
  return Call<std::vector<GpuReading>>(*fast_, "ReadFast", [](Backend& b) { return b.ReadFast(); });
}

Result<std::vector<GpuProcess>> GuardedBackend::ReadProcesses() {
  return Call<std::vector<GpuProcess>>(*fast_, "ReadProcesses",
                                       [](Backend& b) { return b.ReadProcesses(); });
}

Result<std::vector<SlowReading>> GuardedBackend::ReadEnergy() {
  return Call<std::vector<SlowReading>>(*slow_, "ReadEnergy",
                                        [](Backend& b) { return b.ReadEnergy(); });
}

Result<std::vector<ProcessUtilization>> GuardedBackend::ReadProcessUtilization(uint64_t since_us) {
  return Call<std::vector<ProcessUtilization>>(
      *slow_, "ReadProcessUtilization",
      [since_us](Backend& b) { return b.ReadProcessUtilization(since_us); });
}

std::optional<std::string> GuardedBackend::StuckCall() const {
  const auto now = std::chrono::steady_clock::now();
  for (Lane* lane : {fast_.get(), slow_.get()}) {
    std::lock_guard lock(lane->mu);
    if (lane->busy && now - lane->started >= lane->timeout) {
      const auto seconds =
          std::chrono::duration_cast<std::chrono::seconds>(now - lane->started).count();
      return std::string(lane->current) + " blocked for " + std::to_string(seconds) + " s";
    }
  }
  return std::nullopt;
}

}  // namespace expanse::gpu
