#include "http/request_body_budget.h"

#include <utility>

namespace expanse::http_internal {

RequestBodyBudget::RequestBodyBudget(size_t max_total, size_t max_per_address)
    : max_total_(max_total), max_per_address_(max_per_address) {}

RequestBodyBudget::Hold::Hold(RequestBodyBudget* owner, std::string key, size_t bytes)
    : owner_(owner), key_(std::move(key)), bytes_(bytes) {}

RequestBodyBudget::Hold::Hold(Hold&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      key_(std::move(other.key_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

RequestBodyBudget::Hold& RequestBodyBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::move(other.key_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void RequestBodyBudget::Hold::Release() {
  if (owner_ != nullptr && bytes_ != 0)
    owner_->Give(key_, bytes_);
  owner_ = nullptr;
  bytes_ = 0;
}

std::optional<RequestBodyBudget::Hold> RequestBodyBudget::TryHold(const std::string& key,
                                                                  size_t bytes) {
  if (bytes <= kUncountedBytes)
    return Hold();
  // Copied before counting, so a failed allocation cannot leave bytes counted with no hold.
  std::string hold_key = key;
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = per_key_.find(key);
  const size_t for_key = it == per_key_.end() ? 0 : it->second;
  // Compared without adding: a route with a huge limit must not wrap the sums around.
  const auto over = [&](size_t held, size_t max) {
    return held != 0 && (held >= max || bytes > max - held);
  };
  if (over(held_, max_total_) || over(for_key, max_per_address_)) {
    ++refused_;
    return std::nullopt;
  }
  per_key_[key] += bytes;
  held_ += bytes;
  return Hold(this, std::move(hold_key), bytes);
}

void RequestBodyBudget::Give(const std::string& key, size_t bytes) {
  const std::lock_guard<std::mutex> lock(mu_);
  held_ -= bytes;
  const auto it = per_key_.find(key);
  if (it != per_key_.end() && (it->second -= bytes) == 0)
    per_key_.erase(it);
}

size_t RequestBodyBudget::held() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

size_t RequestBodyBudget::held_for(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = per_key_.find(key);
  return it == per_key_.end() ? 0 : it->second;
}

uint64_t RequestBodyBudget::refused() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace expanse::http_internal
