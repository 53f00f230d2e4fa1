// ECDSA P-256 signatures over SHA-256 in the form `cosign sign-blob --key` writes them: the
// signature file holds base64 (standard alphabet, padded) of the DER-encoded signature, and
// keys are PEM files (PKCS#8 private key, SubjectPublicKeyInfo public key). A release signed
// here verifies with `cosign verify-blob --key pub.pem --signature file.sig file` (add
// --insecure-ignore-tlog, as we upload nothing to a transparency log) and with
// `openssl dgst -sha256 -verify pub.pem -signature <decoded sig> file`, and the reverse.
//
// All of it is OpenSSL 3's EVP interface; nothing here implements cryptography itself.

#ifndef EXPANSE_CRYPTO_ECDSA_H_
#define EXPANSE_CRYPTO_ECDSA_H_

#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::crypto {

struct SigningKeyPair {
  std::string private_key_pem;  // "-----BEGIN PRIVATE KEY-----" (PKCS#8, unencrypted)
  std::string public_key_pem;   // "-----BEGIN PUBLIC KEY-----" (SubjectPublicKeyInfo)
};

// A fresh P-256 key pair from the operating system's randomness (through OpenSSL).
Result<SigningKeyPair> GenerateSigningKey();

// base64(DER ECDSA signature over SHA-256(data)), without a trailing newline. The key is an
// unencrypted P-256 private key PEM (PKCS#8 or SEC 1 "EC PRIVATE KEY"); anything else is
// kInvalidArgument with reason "key_invalid". An encrypted PEM is refused rather than
// prompting on the terminal.
Result<std::string> SignBlob(std::string_view private_key_pem, std::string_view data);

// OK when `signature_base64` is a valid signature of `data` by `public_key_pem`. Whitespace
// around the signature (a trailing newline in a .sig file) is ignored. Refusals, each with
// its reason:
//   - kInvalidArgument "key_invalid": not a PEM public key, or a key other than EC P-256;
//   - kInvalidArgument "signature_malformed": not base64, or not one canonical DER
//     ECDSA-Sig-Value (a truncated signature lands here);
//   - kUnauthenticated "signature_mismatch": well formed, but not made by this key over
//     these bytes.
// Messages never contain the signature or the data.
Status VerifyBlob(std::string_view public_key_pem, std::string_view data,
                  std::string_view signature_base64);

// OK when `public_key_pem` is a PEM public key of EC P-256 (else "key_invalid", as VerifyBlob),
// e.g. to check a pinned key when it is found rather than at the first verification.
Status CheckPublicKey(std::string_view public_key_pem);

// The public key PEM of a private key PEM (same rules as SignBlob), e.g. to check that a
// signing key matches the key installers trust.
Result<std::string> PublicKeyOf(std::string_view private_key_pem);

// Standard base64 (RFC 4648 section 4, with '=' padding) as cosign writes it.
std::string Base64Encode(std::string_view bytes);
// Its strict inverse: kInvalidArgument for any other character, missing padding or non-zero
// unused bits. Callers trim whitespace themselves.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace expanse::crypto

#endif  // EXPANSE_CRYPTO_ECDSA_H_
