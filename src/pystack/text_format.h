// A small "{}" formatter for this module's messages and /proc paths, so that pystack needs no
// formatting library: "{}" prints a value with operator<<, "{:#x}" an integer in hex with
// "0x", "{:x}" without. Internal to pystack.
#ifndef EXPANSE_PYSTACK_TEXT_FORMAT_H_
#define EXPANSE_PYSTACK_TEXT_FORMAT_H_

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace expanse::pystack {
namespace format_internal {

inline void Append(std::ostringstream& out, std::string_view format) { out << format; }

template <typename T, typename... Rest>
void Append(std::ostringstream& out, std::string_view format, const T& value, const Rest&... rest) {
  const std::size_t open = format.find('{');
  const std::size_t close = format.find('}', open);
  if (open == std::string_view::npos || close == std::string_view::npos) {
    out << format;
    return;
  }
  out << format.substr(0, open);
  const std::string_view spec = format.substr(open + 1, close - open - 1);
  if constexpr (std::is_integral_v<T>) {
    if (spec == ":#x" || spec == ":x") {
      out << (spec == ":#x" ? "0x" : "") << std::hex << +value << std::dec;
    } else {
      out << +value;  // unary + prints (u)int8_t as a number
    }
  } else {
    out << value;
  }
  Append(out, format.substr(close + 1), rest...);
}

}  // namespace format_internal

template <typename... Args>
std::string Format(std::string_view format, const Args&... args) {
  std::ostringstream out;
  format_internal::Append(out, format, args...);
  return out.str();
}

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_TEXT_FORMAT_H_
