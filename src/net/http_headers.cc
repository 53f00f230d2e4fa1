#include "net/http_headers.h"

namespace expanse::net {

void AddResponseHeaderLine(HeaderList& headers, std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    headers.clear();
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 || headers.size() >= kMaxResponseHeaders)
    return;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
}

}  // namespace expanse::net
