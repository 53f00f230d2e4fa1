#include "http/connection_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <utility>

namespace expanse::http_internal {

namespace {

// `text` as a NUL-terminated string for inet_pton, or nullopt when it cannot be an address:
// an embedded NUL would let "192.0.2.7\0junk" parse as its prefix.
std::optional<std::string> AddressText(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN || text.find('\0') != text.npos) {
    return std::nullopt;
  }
  return std::string(text);
}

std::string V4Text(const in_addr& address) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address, text, sizeof(text));
  return text;
}

// The IPv4 address an IPv4-mapped IPv6 address (::ffff:a.b.c.d) carries.
in_addr MappedV4(const in6_addr& address) {
  in_addr v4{};
  std::memcpy(&v4, &address.s6_addr[12], sizeof(v4));
  return v4;
}

}  // namespace

std::string AddressKey(std::string_view ip_text) {
  const std::optional<std::string> text = AddressText(ip_text);
  if (!text) {
    return std::string(ip_text);
  }
  in_addr v4{};
  if (inet_pton(AF_INET, text->c_str(), &v4) == 1) {
    return V4Text(v4);
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text->c_str(), &v6) != 1) {
    return std::string(ip_text);
  }
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    return V4Text(MappedV4(v6));
  }
  std::memset(&v6.s6_addr[8], 0, 8);  // keep the /64 prefix
  char prefix[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &v6, prefix, sizeof(prefix));
  return std::string(prefix) + "/64";
}

std::string UnmapV4(std::string_view ip_text) {
  const std::optional<std::string> text = AddressText(ip_text);
  in6_addr v6{};
  if (!text || inet_pton(AF_INET6, text->c_str(), &v6) != 1 || !IN6_IS_ADDR_V4MAPPED(&v6)) {
    return std::string(ip_text);
  }
  return V4Text(MappedV4(v6));
}

ConnectionLimiter::ConnectionLimiter(size_t max_total, size_t max_per_address)
    : max_total_(max_total), max_per_address_(max_per_address) {}

ConnectionLimiter::Slot::Slot(ConnectionLimiter* owner, std::string key)
    : owner_(owner), key_(std::move(key)) {}

ConnectionLimiter::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), key_(std::move(other.key_)) {}

ConnectionLimiter::Slot::~Slot() {
  if (owner_ != nullptr) {
    owner_->Release(key_);
  }
}

std::optional<ConnectionLimiter::Slot> ConnectionLimiter::TryAcquire(const std::string& key) {
  // Copied before counting, so a failed allocation cannot leave a count with no slot.
  std::string slot_key = key;
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = per_key_.find(key);
  const size_t for_key = it == per_key_.end() ? 0 : it->second;
  if (open_ >= max_total_ || for_key >= max_per_address_) {
    ++refused_;
    return std::nullopt;
  }
  ++per_key_[key];
  ++open_;
  return Slot(this, std::move(slot_key));
}

void ConnectionLimiter::Release(const std::string& key) {
  const std::lock_guard<std::mutex> lock(mu_);
  --open_;
  const auto it = per_key_.find(key);
  if (it != per_key_.end() && --it->second == 0) {
    per_key_.erase(it);  // the map holds only addresses with open connections
  }
}

size_t ConnectionLimiter::open() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

size_t ConnectionLimiter::open_for(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = per_key_.find(key);
  return it == per_key_.end() ? 0 : it->second;
}

uint64_t ConnectionLimiter::refused() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace expanse::http_internal
