// Random bytes, base64url text and secret tokens (API keys, session and install
// tokens). Randomness comes from libsodium (getrandom(2) on Linux).

#ifndef EXPANSE_CRYPTO_RANDOM_H_
#define EXPANSE_CRYPTO_RANDOM_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::crypto {

// `n` bytes from the operating system's CSPRNG.
std::string RandomBytes(size_t n);

// RFC 4648 section 5 alphabet (A-Z a-z 0-9 - _), without '=' padding.
std::string Base64UrlEncode(std::string_view bytes);

// Inverse of Base64UrlEncode. kInvalidArgument for padding, whitespace, characters
// outside the alphabet, an impossible length, or non-zero unused trailing bits (so
// every byte string has exactly one accepted encoding). The message does not echo
// the input, which may be a secret.
Result<std::string> Base64UrlDecode(std::string_view text);

// A secret token: prefix + base64url(n random bytes), e.g. NewSecretToken("exp_it_",
// 24) gives "exp_it_" and 32 characters. The prefix lets people and secret scanners
// recognise a leaked token; 16 or more random bytes make guessing hopeless.
std::string NewSecretToken(std::string_view prefix, size_t random_bytes);

}  // namespace expanse::crypto

#endif  // EXPANSE_CRYPTO_RANDOM_H_
