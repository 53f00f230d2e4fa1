#include "core/duration.h"

#include <cstdint>
#include <string>

namespace expanse {

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  Status bad = InvalidArgumentError("invalid duration \"" + std::string(text) +
                                    "\": use e.g. 90s, 1m, 1h30m, 500ms or 2d");
  if (text == "0")
    return std::chrono::milliseconds(0);
  if (text.empty())
    return bad;
  constexpr int64_t kMaxMs = int64_t{365} * 24 * 3600 * 1000;
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = n * 10 + (text[i] - '0');
      if (n > kMaxMs)
        return bad;
      ++i;
      ++digits;
    }
    if (digits == 0)
      return bad;
    int64_t unit_ms = 0;
    if (text.substr(i, 2) == "ms") {
      unit_ms = 1;
      i += 2;
    } else if (i < text.size()) {
      switch (text[i]) {
        case 's':
          unit_ms = 1000;
          break;
        case 'm':
          unit_ms = 60 * 1000;
          break;
        case 'h':
          unit_ms = 3600 * 1000;
          break;
        case 'd':
          unit_ms = 24 * 3600 * 1000;
          break;
        default:
          return bad;
      }
      ++i;
    } else {
      return bad;  // a number without a unit
    }
    total += n * unit_ms;
    if (total > kMaxMs)
      return bad;
  }
  return std::chrono::milliseconds(total);
}

}  // namespace expanse
