// Internal to the http module: how many connections a listener holds open, in all and per
// client address, checked right after accept() and before any TLS work, so one address (a
// slowloris, a reconnect loop) cannot take every connection.
//
//   ConnectionLimiter limiter(/*max_total=*/1024, /*max_per_address=*/64);
//   if (auto slot = limiter.TryAcquire(AddressKey(peer_ip))) { ... }  // released on destruction
//
// IPv4 addresses count one by one; IPv6 addresses by their /64 (one host usually owns a
// whole /64, so counting single addresses would not limit it); an IPv4-mapped IPv6 address
// counts as its IPv4 address. Thread-safe.

#ifndef EXPANSE_HTTP_CONNECTION_LIMITER_H_
#define EXPANSE_HTTP_CONNECTION_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace expanse::http_internal {

// The key an address counts under: "192.0.2.7" for IPv4 and v4-mapped IPv6, "2001:db8:1:2::/64"
// (the canonical text of the first 64 bits) for IPv6, the text itself when it is neither.
std::string AddressKey(std::string_view ip_text);

// "::ffff:192.0.2.7" -> "192.0.2.7"; other text unchanged. The address handlers see as
// Request::remote_addr, so per-address limits keep one key whatever the socket family.
std::string UnmapV4(std::string_view ip_text);

class ConnectionLimiter {
 public:
  ConnectionLimiter(size_t max_total, size_t max_per_address);

  // Holds one connection's place; gives it back on destruction. Must not outlive the limiter.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();

   private:
    friend class ConnectionLimiter;
    Slot(ConnectionLimiter* owner, std::string key);
    ConnectionLimiter* owner_;
    std::string key_;
  };

  // A slot, or nullopt (and refused() counts it) when the total or the key's count is at
  // its maximum.
  std::optional<Slot> TryAcquire(const std::string& key);

  size_t open() const;
  size_t open_for(const std::string& key) const;
  uint64_t refused() const;

 private:
  void Release(const std::string& key);

  const size_t max_total_;
  const size_t max_per_address_;
  mutable std::mutex mu_;
  size_t open_ = 0;
  std::unordered_map<std::string, size_t> per_key_{};  // only keys with open connections
  uint64_t refused_ = 0;
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_CONNECTION_LIMITER_H_
