#include "attribution/devices_list.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

constexpr uint32_t kAny = UINT32_MAX;  // '*'; no real device number reaches it

std::optional<uint32_t> ParseDeviceNumber(std::string_view text) {
  if (text == "*") {
    return kAny;
  }
  const std::optional<uint32_t> number = internal::ParseDecimalU32(text);
  if (!number || *number == kAny) {
    return std::nullopt;
  }
  return number;
}

}  // namespace

Result<DeviceWhitelist> ParseDevicesList(std::string_view text) {
  DeviceWhitelist whitelist;
  size_t line_number = 0;
  for (const std::string_view raw_line : internal::Split(text, '\n')) {
    ++line_number;
    const std::string_view line = internal::TrimBlank(raw_line);
    if (line.empty()) {
      continue;
    }
    const auto malformed = [&] {
      return InvalidArgumentError("devices.list line " + std::to_string(line_number) +
                                  ": expected \"<a|b|c> <major>:<minor> <rwm>\", got " +
                                  QuoteForMessage(line))
          .WithReason("devices_list_malformed");
    };
    const size_t first_space = line.find(' ');
    const size_t last_space = line.rfind(' ');
    if (first_space != 1 || last_space == first_space) {
      return malformed();
    }
    const char type = line[0];
    const std::string_view numbers = line.substr(2, last_space - 2);
    const std::string_view access = line.substr(last_space + 1);
    const size_t colon = numbers.find(':');
    if ((type != 'a' && type != 'b' && type != 'c') || colon == std::string_view::npos ||
        access.empty() || access.find_first_not_of("rwm") != std::string_view::npos) {
      return malformed();
    }
    const std::optional<uint32_t> major = ParseDeviceNumber(numbers.substr(0, colon));
    const std::optional<uint32_t> minor = ParseDeviceNumber(numbers.substr(colon + 1));
    if (!major || !minor) {
      return malformed();
    }
    // Opening a GPU needs read or write; "m" alone only allows mknod.
    if (access.find_first_of("rw") == std::string_view::npos || type == 'b') {
      continue;
    }
    if (type == 'a' && *major == kAny && *minor == kAny && access.size() == 3)
      whitelist.default_allow = true;
    if (type == 'a' || ((*major == kAny || *major == kNvidiaMajor) && *minor == kAny)) {
      whitelist.all_gpus = true;
    } else if (*major == kNvidiaMajor && *minor < kFirstNvidiaControlMinor) {
      whitelist.gpu_minors.push_back(*minor);
    }
  }
  std::sort(whitelist.gpu_minors.begin(), whitelist.gpu_minors.end());
  whitelist.gpu_minors.erase(std::unique(whitelist.gpu_minors.begin(), whitelist.gpu_minors.end()),
                             whitelist.gpu_minors.end());
  return whitelist;
}

}  // namespace expanse::attribution
