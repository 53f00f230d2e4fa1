#include "outbox/backoff.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

namespace expanse::outbox {

RandomSource DefaultRandomSource() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

Backoff::Backoff(int64_t base_ms, int64_t cap_ms, RandomSource random)
    : base_ms_(std::max<int64_t>(base_ms, 1)),
      cap_ms_(std::max(cap_ms, base_ms_)),
      random_(std::move(random)) {}

int64_t Backoff::NextDelayMs() {
  // Doubling stops once the cap is reached, so the shift never overflows.
  int64_t ceiling = base_ms_;
  for (int i = 0; i < failures_ && ceiling < cap_ms_; ++i)
    ceiling *= 2;
  ceiling = std::min(ceiling, cap_ms_);
  ++failures_;
  const double fraction = std::clamp(random_(), 0.0, 1.0);
  return std::min(static_cast<int64_t>(fraction * static_cast<double>(ceiling)), ceiling - 1);
}

std::optional<int64_t> ParseRetryAfterMs(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  if (value.empty() || value.size() > 9)  // 9 digits: over 31 years, plenty
    return std::nullopt;
  int64_t seconds = 0;
  for (char c : value) {
    if (c < '0' || c > '9')
      return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds * 1000;
}

}  // namespace expanse::outbox
