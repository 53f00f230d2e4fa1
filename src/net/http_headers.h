// The header lines of an HTTP response as HttpClient keeps them (HttpResponse::headers). libcurl
// hands over every line of every response it reads, interim ones (100 Continue) included, as
// the server sent it: any server, or anything between, can send any bytes there.
#ifndef EXPANSE_NET_HTTP_HEADERS_H_
#define EXPANSE_NET_HTTP_HEADERS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace expanse::net {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The most headers one response keeps. The answers the clients read (the control and data
// planes, an object store, a webhook's receiver) carry a few dozen at most, while libcurl bounds
// the length of a header line, not their number: a hostile server could send millions of short
// ones, each an allocation here. The lines past the bound are dropped.
inline constexpr size_t kMaxResponseHeaders = 256;

// Adds one header line as libcurl hands it over (its CR LF included or not) to `headers`:
// - a status line ("HTTP/...") starts a new response, so only the final one's headers are kept;
// - a line without a name (no ':', or nothing before it) is ignored, as is the blank line that
//   ends the headers;
// - the value is kept without the spaces and tabs around it;
// - past kMaxResponseHeaders, lines are dropped.
void AddResponseHeaderLine(HeaderList& headers, std::string_view line);

}  // namespace expanse::net

#endif  // EXPANSE_NET_HTTP_HEADERS_H_
