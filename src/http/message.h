// The request and response types that Expanse's HTTP handlers see. They hold plain
// data, so handlers are testable without a socket and no httplib type leaks out of
// this module.

#ifndef EXPANSE_HTTP_MESSAGE_H_
#define EXPANSE_HTTP_MESSAGE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace expanse::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method{};  // "GET", "POST", ...; HEAD requests reach GET routes as "HEAD"
  // Percent-decoded, without the query string. "%2F" decodes to '/' before routing,
  // so a path parameter never contains '/'.
  std::string path{};
  std::map<std::string, std::string, std::less<>> path_params{};        // ":name" -> segment
  std::multimap<std::string, std::string, std::less<>> query_params{};  // decoded
  // As sent, in case-insensitive name order. httplib's pseudo-headers (REMOTE_ADDR,
  // ...) are removed: a client can send headers of the same name, so they prove
  // nothing. Use remote_addr.
  HeaderList headers{};
  std::string body{};         // decoded; at most the route's max_body_bytes (else the listener's)
  std::string remote_addr{};  // peer address of the TCP connection, e.g. "127.0.0.1"
  int remote_port = 0;

  // The value of path parameter `name`; "" when the route has no such parameter.
  std::string_view PathParam(std::string_view name) const;
  // The first value of query parameter `name`, if present.
  std::optional<std::string_view> QueryParam(std::string_view name) const;
  // The first value of header `name` (compared case-insensitively), if present.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body{};
  // Extra headers. Content-Type comes from content_type; values with CR or LF are
  // dropped (and logged) rather than allowed to split the response.
  HeaderList headers{};
};

// A handler runs on one of the listener's worker threads, possibly concurrently with
// itself. An exception it throws becomes a logged 500; it should not rely on that.
using Handler = std::function<Response(const Request&)>;

// `body` must already be JSON text.
Response JsonResponse(int status, std::string body);

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_MESSAGE_H_
