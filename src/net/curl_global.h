// Internal to the net module: libcurl's process-wide initialisation, shared by its clients.
#ifndef EXPANSE_NET_CURL_GLOBAL_H_
#define EXPANSE_NET_CURL_GLOBAL_H_

#include <string>

namespace expanse::net::internal {

// curl_global_init is not thread-safe with every TLS backend, so it runs once, before the
// first handle of any client; it is never undone (the process may hold clients until exit).
// Empty when it succeeded, else libcurl's description of the failure.
std::string CurlGlobalInit();

}  // namespace expanse::net::internal

#endif  // EXPANSE_NET_CURL_GLOBAL_H_
