// Internal to the http module: the request body bytes a listener holds at once, in all and
// per client address. A body's memory is taken when its header announces it (Beast reserves
// the whole Content-Length before the first byte comes), and it is held until its handler is
// done; without a bound, 1,024 connections each announcing a 64 MiB segment and sending a
// byte a second would take 64 GiB before any of them could be authenticated.
//
//   RequestBodyBudget budget(/*max_total=*/1 << 30, /*max_per_address=*/256 << 20);
//   if (auto hold = budget.TryHold(AddressKey(peer_ip), announced_bytes)) { ... }
//
// Bodies up to kUncountedBytes are not counted (heartbeats, API calls: they cannot add up to
// much within the connection limits). One body alone is always let through, in all and for
// its address, whatever its size: a route's own limit bounds it. Thread-safe.

#ifndef EXPANSE_HTTP_REQUEST_BODY_BUDGET_H_
#define EXPANSE_HTTP_REQUEST_BODY_BUDGET_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace expanse::http_internal {

class RequestBodyBudget {
 public:
  static constexpr size_t kUncountedBytes = 64 << 10;

  RequestBodyBudget(size_t max_total, size_t max_per_address);

  // One body's bytes, given back on destruction or Release(). Must not outlive the budget.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Release(); }
    void Release();

   private:
    friend class RequestBodyBudget;
    Hold(RequestBodyBudget* owner, std::string key, size_t bytes);
    RequestBodyBudget* owner_ = nullptr;
    std::string key_{};
    size_t bytes_ = 0;
  };

  // A hold of `bytes` for `key`, or nullopt (and refused() counts it) when they would pass
  // the total or the key's share beside bodies already held.
  std::optional<Hold> TryHold(const std::string& key, size_t bytes);

  size_t held() const;
  size_t held_for(const std::string& key) const;
  uint64_t refused() const;

 private:
  void Give(const std::string& key, size_t bytes);

  const size_t max_total_;
  const size_t max_per_address_;
  mutable std::mutex mu_;
  size_t held_ = 0;
  std::unordered_map<std::string, size_t> per_key_{};  // only keys holding bytes
  uint64_t refused_ = 0;
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_REQUEST_BODY_BUDGET_H_
