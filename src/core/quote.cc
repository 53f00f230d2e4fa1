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

}  // namespace expanse
