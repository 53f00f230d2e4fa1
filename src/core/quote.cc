#include "core/quote.h"

#include <array>
#include <cstdio>

namespace expanse {

std::string EscapeForMessage(std::string_view text, std::size_t max_chars) {
  std::string out;
  for (const char c : text.substr(0, max_chars)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c >= 0x20 && c < 0x7F) {
      out += c;
    } else {
      std::array<char, 5> escaped{};  // "\xAB" and the terminating NUL
      std::snprintf(escaped.data(), escaped.size(), "\\x%02X", static_cast<unsigned char>(c));
      out += escaped.data();
    }
  }
  if (text.size() > max_chars)
    out += "...";
  return out;
}

std::string QuoteForMessage(std::string_view text, std::size_t max_chars) {
  return "\"" + EscapeForMessage(text, max_chars) + "\"";
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace expanse
