#include "deploy/plane_url.h"

#include <cctype>
#include <string>

#include <fmt/format.h>

#include "core/loopback.h"
#include "core/quote.h"

namespace expanse::deploy {
namespace {

constexpr std::size_t kMaxUrlBytes = 2048;

Status BadUrl(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_url");
}

// RFC 3986 characters that may follow the authority (path and query); '#' is not among them.
bool IsUrlTailChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~:/?[]@!$&'()*+,;=%").find(c) != std::string_view::npos;
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-';
}

}  // namespace

Status CheckPlaneUrl(std::string_view flag, std::string_view url) {
  const std::string shown = std::string(flag) + " " + QuoteForMessage(url);
  if (url.empty())
    return BadUrl(std::string(flag) + " is empty: expected an https:// URL");
  if (url.size() > kMaxUrlBytes)
    return BadUrl(fmt::format("{} is {} bytes; the limit is {}", flag, url.size(), kMaxUrlBytes));
  std::string_view rest = url;
  bool https = false;
  if (rest.starts_with("https://")) {
    https = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return BadUrl(shown + " must start with https://");
  }
  const std::size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view tail =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos)
    return BadUrl(std::string(flag) + " has a user part: URLs must not carry credentials");
  std::string_view host = authority;
  std::string_view port;
  if (host.starts_with('[')) {  // IPv6 literal
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos)
      return BadUrl(shown + " has an unterminated IPv6 address");
    for (char c : host.substr(1, close - 1)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        return BadUrl(shown + " has an invalid IPv6 address");
    }
    port = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!port.empty() && !port.starts_with(':'))
      return BadUrl(shown + " has text after the IPv6 address");
  } else if (const std::size_t colon = host.find(':'); colon != std::string_view::npos) {
    port = host.substr(colon);
    host = host.substr(0, colon);
  }
  if (host.empty() || (host.size() <= 2 && host.starts_with('[')))
    return BadUrl(shown + " has no host name");
  if (!host.starts_with('[')) {
    for (char c : host) {
      if (!IsHostChar(c))
        return BadUrl(shown + " has an invalid host name");
    }
  }
  if (!port.empty()) {
    port.remove_prefix(1);
    int number = 0;
    bool valid = !port.empty() && port.size() <= 5;
    for (char c : port) {
      valid = valid && c >= '0' && c <= '9';
      number = valid ? number * 10 + (c - '0') : 0;
    }
    if (!valid || number < 1 || number > 65535)
      return BadUrl(shown + " has an invalid port");
  }
  if (!https && !IsLoopbackHost(host)) {
    return BadUrl(shown +
                  " must use https://; plain http:// is accepted only for a loopback host "
                  "(localhost, 127.0.0.0/8, [::1])");
  }
  if (tail.find('#') != std::string_view::npos)
    return BadUrl(shown + " has a fragment ('#'), which a plane URL never needs");
  for (char c : tail) {
    if (!IsUrlTailChar(c))
      return BadUrl(shown + " contains a character a URL cannot hold (space, quote, control)");
  }
  return OkStatus();
}

}  // namespace expanse::deploy
