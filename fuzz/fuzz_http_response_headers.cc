// The header lines of an HTTP answer as the clients keep them (src/net/http_headers.h): any
// server, or anything between, can send any bytes there, and as many lines as it likes. Input:
// the lines as libcurl hands them over, each ended by '\n'.
// Properties:
// - nothing throws or crashes;
// - at most kMaxResponseHeaders are kept, and none from before the last status line;
// - a kept header has a name (no ':' in it) and a value without spaces or tabs around it;
// - the lookup by name (HttpResponse::Header) finds the first header of that name.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_client.h"
#include "net/http_headers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace expanse::net;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  HttpResponse response;
  while (!input.empty()) {
    const size_t newline = input.find('\n');
    const std::string_view line =
        input.substr(0, newline == std::string_view::npos ? newline : newline + 1);
    input.remove_prefix(line.size());
    AddResponseHeaderLine(response.headers, line);
    if (line.starts_with("HTTP/") && !response.headers.empty())
      std::abort();
  }
  if (response.headers.size() > kMaxResponseHeaders)
    std::abort();
  for (const auto& [name, value] : response.headers) {
    if (name.empty() || name.find(':') != std::string::npos)
      std::abort();
    if (!value.empty() && (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
                           value.back() == '\t'))
      std::abort();
  }
  if (!response.headers.empty()) {
    const auto& [name, value] = response.headers.front();
    const std::optional<std::string_view> found = response.Header(name);
    if (!found || found->data() != value.data())
      std::abort();
  }
  return 0;
}
