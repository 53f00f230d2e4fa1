// Which URLs the daemon's HTTP client may talk to: https anywhere, plain http only to this
// machine. A credential sent in clear text to another host could be read on the wire, so
// the rule is enforced by the client itself rather than left to configuration.
#ifndef EXPANSE_NET_URL_POLICY_H_
#define EXPANSE_NET_URL_POLICY_H_

#include <string>
#include <string_view>

#include "core/loopback.h"
#include "core/status.h"

namespace expanse::net {

struct UrlParts {
  std::string scheme;  // lower case: "https" or "http"
  std::string host;    // without IPv6 brackets
};

// Splits an absolute URL into scheme and host. kInvalidArgument ("invalid_url") when it is
// not an absolute http(s) URL with a host, or carries user:password.
Status SplitUrl(std::string_view url, UrlParts* parts);

// OK for https URLs and for http URLs whose host is loopback. kInvalidArgument with reason
// "insecure_url" for plain http to any other host, "unsupported_url" for other schemes,
// "invalid_url" for text that is not a URL.
Status CheckUrlAllowed(std::string_view url);

// `url` with its user name and password (a proxy URL may carry them) replaced by "***", for
// diagnostics and logs; unchanged when it has none. Text libcurl cannot parse as a URL keeps
// only what follows its last '@'.
std::string RedactUrlCredentials(std::string_view url);

}  // namespace expanse::net

#endif  // EXPANSE_NET_URL_POLICY_H_
