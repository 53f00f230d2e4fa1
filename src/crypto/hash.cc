#include "crypto/hash.h"

#include <sodium.h>

#include <array>
#include <string>

#include "crypto/sodium_init.h"

namespace expanse::crypto {

std::string Sha256Hex(std::string_view data) {
  crypto_internal::EnsureSodiumInitialized();
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(data.data()),
                     data.size());
  std::string hex(digest.size() * 2 + 1, '\0');  // + the NUL sodium_bin2hex writes
  sodium_bin2hex(hex.data(), hex.size(), digest.data(), digest.size());
  hex.resize(digest.size() * 2);
  return hex;
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  crypto_internal::EnsureSodiumInitialized();
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()),
                              key.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(data.data()),
                                data.size());
  std::array<unsigned char, crypto_auth_hmacsha256_BYTES> mac{};
  crypto_auth_hmacsha256_final(&state, mac.data());
  std::string hex(mac.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), mac.data(), mac.size());
  hex.resize(mac.size() * 2);
  return hex;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  crypto_internal::EnsureSodiumInitialized();
  if (a.size() != b.size()) {
    return false;
  }
  if (a.empty()) {
    return true;  // string_view's data() may be null; sodium_memcmp wants pointers
  }
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string HashSecretToken(std::string_view token) { return Sha256Hex(token); }

}  // namespace expanse::crypto
