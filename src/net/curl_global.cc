#include "net/curl_global.h"

#include <mutex>

#include <curl/curl.h>

namespace expanse::net::internal {

std::string CurlGlobalInit() {
  static std::once_flag once;
  static CURLcode code = CURLE_OK;
  std::call_once(once, [] { code = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return code == CURLE_OK ? std::string() : curl_easy_strerror(code);
}

}  // namespace expanse::net::internal
