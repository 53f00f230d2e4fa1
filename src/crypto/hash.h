// SHA-256, constant-time comparison and how Expanse stores secret tokens.

#ifndef EXPANSE_CRYPTO_HASH_H_
#define EXPANSE_CRYPTO_HASH_H_

#include <string>
#include <string_view>

namespace expanse::crypto {

// SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

// HMAC-SHA-256 of `data` under `key`, as 64 lowercase hex digits.
std::string HmacSha256Hex(std::string_view key, std::string_view data);

// Compares secrets without leaking, through timing, how many leading bytes match.
// Returns false at once when the lengths differ: lengths of our secrets are public.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The form in which a secret token is stored (and looked up): Sha256Hex of the whole
// token, prefix included. Tokens from NewSecretToken carry 128+ random bits, so a
// fast hash is enough; a slow password hash would only cost every request time.
std::string HashSecretToken(std::string_view token);

}  // namespace expanse::crypto

#endif  // EXPANSE_CRYPTO_HASH_H_
