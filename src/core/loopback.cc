#include "core/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

namespace expanse {

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost")
    return true;
  // Brackets are how a URL writes an IPv6 address; they never hold an IPv4 one.
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed)
    host = host.substr(1, host.size() - 2);
  const std::string text(host);  // inet_pton wants a NUL-terminated string
  in_addr v4{};
  if (!bracketed && inet_pton(AF_INET, text.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6))
      return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace expanse
