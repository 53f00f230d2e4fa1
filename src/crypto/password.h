// Password hashing for console users: Argon2id through libsodium's crypto_pwhash_str,
// whose output is a self-describing "$argon2id$v=19$m=...,t=...,p=1$salt$hash"
// string, so the cost can be raised later without breaking stored hashes.

#ifndef EXPANSE_CRYPTO_PASSWORD_H_
#define EXPANSE_CRYPTO_PASSWORD_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::crypto {

// Passwords longer than this are refused before hashing (bounds the work one login
// request can cause; no human types more).
inline constexpr size_t kMaxPasswordBytes = 1024;

struct PasswordHashCost {
  unsigned long long ops = 0;  // Argon2 passes (t)
  size_t mem_bytes = 0;        // Argon2 memory (m), in bytes
};

// libsodium's recommendation for interactive logins: 2 passes over 64 MiB.
PasswordHashCost InteractiveCost();
// The smallest cost libsodium allows. Fast and weak: for tests only.
PasswordHashCost MinimumCost();

// kInvalidArgument when the password is empty, longer than kMaxPasswordBytes or not
// valid UTF-8, or the cost is outside libsodium's limits; kResourceExhausted when
// the memory for the hash cannot be allocated.
Result<std::string> HashPassword(std::string_view password, PasswordHashCost cost);

// True when `password` matches `stored_hash` (a HashPassword result). False for a
// wrong password, a password HashPassword would refuse, and any stored string that
// is not a well-formed $argon2id$ hash.
bool VerifyPassword(std::string_view stored_hash, std::string_view password);

}  // namespace expanse::crypto

#endif  // EXPANSE_CRYPTO_PASSWORD_H_
