// Internal to the net module: libcurl's process-wide initialisation and the small helpers its
// clients share.
#ifndef EXPANSE_NET_CURL_GLOBAL_H_
#define EXPANSE_NET_CURL_GLOBAL_H_

#include <string>
#include <string_view>

#include <curl/curl.h>

namespace expanse::net::internal {

// curl_global_init is not thread-safe with every TLS backend, so it runs once, before the
// first handle of any client; it is never undone (the process may hold clients until exit).
// Empty when it succeeded, else libcurl's description of the failure.
std::string CurlGlobalInit();

// Owns a header or recipient list.
struct SlistFree {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// A header value or mail field with one of these could smuggle in another header.
inline bool HasLineBreakOrNul(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

}  // namespace expanse::net::internal

#endif  // EXPANSE_NET_CURL_GLOBAL_H_
