#include "crypto/password.h"

#include <sodium.h>

#include <array>
#include <string>

#include "core/utf8.h"
#include "crypto/sodium_init.h"

namespace expanse::crypto {

namespace {

constexpr std::string_view kArgon2idPrefix = "$argon2id$";

Status CheckPassword(std::string_view password) {
  if (password.empty()) {
    return InvalidArgumentError("password is empty");
  }
  if (password.size() > kMaxPasswordBytes) {
    return InvalidArgumentError("password is " + std::to_string(password.size()) +
                                " bytes long; at most " + std::to_string(kMaxPasswordBytes) +
                                " bytes are allowed");
  }
  if (!IsValidUtf8(password)) {
    return InvalidArgumentError("password is not valid UTF-8");
  }
  return OkStatus();
}

}  // namespace

PasswordHashCost InteractiveCost() {
  return {crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE};
}

PasswordHashCost MinimumCost() { return {crypto_pwhash_OPSLIMIT_MIN, crypto_pwhash_MEMLIMIT_MIN}; }

Result<std::string> HashPassword(std::string_view password, PasswordHashCost cost) {
  crypto_internal::EnsureSodiumInitialized();
  EXPANSE_RETURN_IF_ERROR(CheckPassword(password));
  if (cost.ops < crypto_pwhash_OPSLIMIT_MIN || cost.ops > crypto_pwhash_OPSLIMIT_MAX ||
      cost.mem_bytes < crypto_pwhash_MEMLIMIT_MIN || cost.mem_bytes > crypto_pwhash_MEMLIMIT_MAX) {
    return InvalidArgumentError("password hash cost ops=" + std::to_string(cost.ops) +
                                " mem_bytes=" + std::to_string(cost.mem_bytes) +
                                " is outside libsodium's limits (at least ops=" +
                                std::to_string(crypto_pwhash_OPSLIMIT_MIN) +
                                " mem_bytes=" + std::to_string(crypto_pwhash_MEMLIMIT_MIN) + ")");
  }
  std::array<char, crypto_pwhash_STRBYTES> out{};
  // crypto_pwhash_str fails only when it cannot allocate the Argon2 memory.
  if (crypto_pwhash_str(out.data(), password.data(), password.size(), cost.ops, cost.mem_bytes) !=
      0) {
    return ResourceExhaustedError("could not allocate " + std::to_string(cost.mem_bytes >> 20) +
                                  " MiB to hash a password");
  }
  return std::string(out.data());
}

bool VerifyPassword(std::string_view stored_hash, std::string_view password) {
  crypto_internal::EnsureSodiumInitialized();
  if (!CheckPassword(password).ok()) {
    return false;
  }
  // crypto_pwhash_str_verify reads a NUL-terminated string of bounded size, and would
  // also accept $argon2i$; we only ever store Argon2id.
  if (stored_hash.size() >= crypto_pwhash_STRBYTES || !stored_hash.starts_with(kArgon2idPrefix) ||
      stored_hash.find('\0') != std::string_view::npos) {
    return false;
  }
  const std::string terminated(stored_hash);
  return crypto_pwhash_str_verify(terminated.c_str(), password.data(), password.size()) == 0;
}

}  // namespace expanse::crypto
