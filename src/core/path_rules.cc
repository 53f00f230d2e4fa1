#include "core/path_rules.h"

#include <string>

#include "core/quote.h"
#include "core/utf8.h"

namespace expanse {
namespace {

// PATH_MAX less the terminating NUL.
constexpr std::size_t kMaxPathBytes = 4095;

Status BadPath(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_path");
}

bool IsControl(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

}  // namespace

Status CheckAbsolutePath(std::string_view field, std::string_view path) {
  const std::string shown = std::string(field) + " " + QuoteForMessage(path);
  if (path.empty())
    return BadPath(std::string(field) + " is empty: expected an absolute path");
  if (path.front() != '/')
    return BadPath(shown + " is not an absolute path");
  if (path.size() > kMaxPathBytes) {
    return BadPath(std::string(field) + " is " + std::to_string(path.size()) +
                   " bytes; the limit is " + std::to_string(kMaxPathBytes));
  }
  if (!IsValidUtf8(path))
    return BadPath(shown + " is not valid UTF-8");
  for (char c : path) {
    if (IsControl(c))
      return BadPath(shown + " contains a control character (newline, tab, ...)");
  }
  std::size_t start = 1;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos)
      end = path.size();
    const std::string_view component = path.substr(start, end - start);
    if (component == "." || component == "..")
      return BadPath(shown + " contains a '" + std::string(component) + "' component");
    start = end + 1;
  }
  return OkStatus();
}

}  // namespace expanse
