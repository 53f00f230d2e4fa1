#include "store/message_text.h"

#include <time.h>

#include <array>
#include <cstdio>

#include "core/quote.h"

namespace expanse::store::store_internal {
namespace {

constexpr std::size_t kMaxQuotedChars = 80;
constexpr std::size_t kMaxPlainIdChars = 64;
constexpr int64_t kMillisPerSecond = 1000;

bool IsPlainIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

}  // namespace

std::string QuoteForMessage(std::string_view text) {
  return ::expanse::QuoteForMessage(text, kMaxQuotedChars);
}

std::string IdForMessage(std::string_view id) {
  if (id.empty() || id.size() > kMaxPlainIdChars) {
    return QuoteForMessage(id);
  }
  for (const char c : id) {
    if (!IsPlainIdChar(c)) {
      return QuoteForMessage(id);
    }
  }
  return std::string(id);
}

std::string FormatUtcMillis(int64_t epoch_ms) {
  // Floor division, so times before 1970 still get a millisecond part in [0, 999].
  int64_t seconds = epoch_ms / kMillisPerSecond;
  int64_t millis = epoch_ms % kMillisPerSecond;
  if (millis < 0) {
    millis += kMillisPerSecond;
    --seconds;
  }
  const auto time = static_cast<time_t>(seconds);
  struct tm utc {};
  if (gmtime_r(&time, &utc) == nullptr) {
    return std::to_string(epoch_ms) + " ms since the Unix epoch";
  }
  std::array<char, 80> text{};  // room for any int fields, which -Wformat-truncation checks
  std::snprintf(text.data(), text.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text.data();
}

}  // namespace expanse::store::store_internal
