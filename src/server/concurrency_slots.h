// How many of one kind of costly work run at once (parsing trace segments: a 22 MiB array of
// empty objects took 610 MiB to parse): a few hold a slot, the others are asked to come back.
//
//   ConcurrencySlots parses(2);
//   std::optional<ConcurrencySlots::Slot> slot = parses.TryTake();
//   if (!slot) return Busy();   // 503 with Retry-After
//   ...                          // the slot is given back when `slot` goes (or slot.reset())
//
// Thread-safe; a Slot must not outlive its ConcurrencySlots.
#ifndef EXPANSE_SERVER_CONCURRENCY_SLOTS_H_
#define EXPANSE_SERVER_CONCURRENCY_SLOTS_H_

#include <atomic>
#include <optional>
#include <utility>

namespace expanse::server {

class ConcurrencySlots {
 public:
  explicit ConcurrencySlots(int at_once) : at_once_(at_once) {}
  ConcurrencySlots(const ConcurrencySlots&) = delete;
  ConcurrencySlots& operator=(const ConcurrencySlots&) = delete;

  class Slot {
   public:
    Slot(Slot&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot() {
      if (owner_ != nullptr)
        owner_->in_use_.fetch_sub(1);
    }

   private:
    friend class ConcurrencySlots;
    explicit Slot(ConcurrencySlots* owner) : owner_(owner) {}
    ConcurrencySlots* owner_;
  };

  // A slot, or nullopt when all are taken.
  std::optional<Slot> TryTake() {
    if (in_use_.fetch_add(1) >= at_once_) {
      in_use_.fetch_sub(1);
      return std::nullopt;
    }
    return Slot(this);
  }

  int in_use() const { return in_use_.load(); }

 private:
  const int at_once_;
  std::atomic<int> in_use_{0};
};

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_CONCURRENCY_SLOTS_H_
