// A release's `.sig` file and a verification key, as the installer reads them before anything
// they cover is trusted (src/crypto/ecdsa.h): the signature comes from a mirror or a staged
// directory, the key from a file an operator names. Input: the bytes, read as a signature over
// fixed archive bytes with a fixed key, and as a public key PEM. Properties:
// - nothing crashes, whatever the base64, DER or PEM;
// - a refusal has its documented reason;
// - the one real signature in the seeds verifies, so the refusals are not for everything.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "crypto/ecdsa.h"

namespace {

// A P-256 key made for this target with `openssl ecparam -name prime256v1 -genkey`, and its
// signature of kData (`openssl dgst -sha256 -sign`, base64): fuzz/corpus/release_signature/valid.
constexpr char kPublicKey[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEnv8kYhwCT/tIwicLBGRvQx1PBYR9\n"
    "4H+jAe/yvFkDTYbVaES7annmEpB8CHxoA4rZsOEGQOWlFsljt08yo0ZTsg==\n"
    "-----END PUBLIC KEY-----\n";
constexpr char kData[] = "expanse-daemon_1.8.0_linux_amd64.tar.gz bytes";
constexpr char kSignature[] =
    "MEQCICvmK7DxtSxwkBgqykBB0zrwBloBSL1TCjclRUgVA8UmAiBVvHI24DC4BQ+7X123bXhVthjMqGQfz0Z4EvrisV1AEA"
    "==";

void Require(bool condition) {
  if (!condition)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool kRealSignatureVerifies =
      expanse::crypto::VerifyBlob(kPublicKey, kData, kSignature).ok();
  Require(kRealSignatureVerifies);
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const expanse::Status verified = expanse::crypto::VerifyBlob(kPublicKey, kData, input);
  Require(verified.ok() || verified.reason() == "signature_malformed" ||
          verified.reason() == "signature_mismatch");

  const expanse::Status key = expanse::crypto::CheckPublicKey(input);
  Require(key.ok() || key.reason() == "key_invalid");
  if (key.ok()) {
    const expanse::Status with_key = expanse::crypto::VerifyBlob(input, kData, kSignature);
    Require(with_key.ok() || with_key.reason() == "signature_mismatch");
  }
  return 0;
}
