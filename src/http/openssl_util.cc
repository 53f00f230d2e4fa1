#include "http/openssl_util.h"

#include <array>
#include <string>

#include <openssl/err.h>

namespace expanse::http_internal {

std::string TakeOpenSslErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    std::array<char, 256> buffer{};
    ERR_error_string_n(code, buffer.data(), buffer.size());
    if (!text.empty()) {
      text += "; ";
    }
    text += buffer.data();
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

}  // namespace expanse::http_internal
