#include "crypto/random.h"

#include <sodium.h>

#include <string>

#include "crypto/sodium_init.h"

namespace expanse::crypto {

namespace {
constexpr int kVariant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
}  // namespace

std::string RandomBytes(size_t n) {
  crypto_internal::EnsureSodiumInitialized();
  std::string bytes(n, '\0');
  if (n > 0) {
    randombytes_buf(bytes.data(), n);
  }
  return bytes;
}

std::string Base64UrlEncode(std::string_view bytes) {
  crypto_internal::EnsureSodiumInitialized();
  // sodium_base64_ENCODED_LEN counts the terminating NUL that sodium_bin2base64
  // writes.
  std::string text(sodium_base64_ENCODED_LEN(bytes.size(), kVariant), '\0');
  sodium_bin2base64(text.data(), text.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), kVariant);
  text.resize(text.size() - 1);
  return text;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  crypto_internal::EnsureSodiumInitialized();
  // One byte of room even for empty input, so the buffer pointer is never null.
  std::string bytes(text.size() / 4 * 3 + 3, '\0');
  size_t decoded_length = 0;
  const char* end = nullptr;
  const int rc =
      sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                        text.size(), /*ignore=*/nullptr, &decoded_length, &end, kVariant);
  // libsodium stops at the first byte outside the alphabet and reports success for
  // the prefix; a complete decode must consume all of the text.
  if (rc != 0 || end != text.data() + text.size()) {
    return InvalidArgumentError("invalid base64url text (" + std::to_string(text.size()) +
                                " characters): expected only A-Z a-z 0-9 - _ without padding");
  }
  bytes.resize(decoded_length);
  return bytes;
}

std::string NewSecretToken(std::string_view prefix, size_t random_bytes) {
  std::string token(prefix);
  token += Base64UrlEncode(RandomBytes(random_bytes));
  return token;
}

}  // namespace expanse::crypto
