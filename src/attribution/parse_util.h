// Small text helpers shared by the attribution module's parsers. Internal to the module.
#ifndef EXPANSE_ATTRIBUTION_PARSE_UTIL_H_
#define EXPANSE_ATTRIBUTION_PARSE_UTIL_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace expanse::attribution::internal {

// A decimal number made of ASCII digits only (no sign, no spaces) that fits in 32 bits.
std::optional<uint32_t> ParseDecimalU32(std::string_view text);

// `text` cut at every `separator`; empty pieces are kept, so "a,,b" gives three.
std::vector<std::string_view> Split(std::string_view text, char separator);

// `text` without leading and trailing spaces, tabs, CR and LF.
std::string_view TrimBlank(std::string_view text);

bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace expanse::attribution::internal

#endif  // EXPANSE_ATTRIBUTION_PARSE_UTIL_H_
