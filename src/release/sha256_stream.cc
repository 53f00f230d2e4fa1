#include "release/sha256_stream.h"

#include <array>
#include <cstdio>
#include <cstdlib>

#include <openssl/evp.h>

namespace expanse::release_internal {

struct Sha256Stream::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

// Allocation or initialisation failures of a digest are out-of-memory conditions of the
// process, not input errors: abort like any failed allocation would.
Sha256Stream::Sha256Stream() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) {
    std::fputs("expanse: cannot initialise SHA-256\n", stderr);
    std::abort();
  }
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(std::string_view bytes) {
  if (!bytes.empty() && EVP_DigestUpdate(context_->ctx, bytes.data(), bytes.size()) != 1) {
    std::fputs("expanse: SHA-256 update failed\n", stderr);
    std::abort();
  }
}

std::string Sha256Stream::FinishHex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->ctx, digest.data(), &length) != 1) {
    std::fputs("expanse: SHA-256 finish failed\n", stderr);
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xF];
  }
  return hex;
}

}  // namespace expanse::release_internal
