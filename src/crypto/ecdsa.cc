#include "crypto/ecdsa.h"

#include <sodium.h>

#include <array>
#include <cctype>
#include <string>

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "crypto/openssl_ptr.h"
#include "crypto/sodium_init.h"

namespace expanse::crypto {
namespace {

using EcdsaSigPtr = OpenSslPtr<ECDSA_SIG, ECDSA_SIG_free>;

constexpr char kCurveName[] = "prime256v1";  // OpenSSL's name for NIST P-256 (secp256r1)
constexpr int kBase64Variant = sodium_base64_VARIANT_ORIGINAL;
// A DER P-256 signature is at most 72 bytes; anything far longer is not one, and capping
// before decoding keeps hostile .sig files from costing memory.
constexpr size_t kMaxSignatureTextBytes = 1024;

Status KeyInvalid(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("key_invalid");
}

Status SignatureMalformed(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("signature_malformed");
}

BioPtr MemoryBio(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Refuses the passphrase prompt OpenSSL would otherwise show for an encrypted PEM.
int NoPassphrase(char*, int, int, void*) { return -1; }

Status CheckP256(EVP_PKEY* key, std::string_view what) {
  if (!EVP_PKEY_is_a(key, "EC")) {
    return KeyInvalid(std::string(what) + " is a " + EVP_PKEY_get0_type_name(key) +
                      " key; release signatures use ECDSA P-256 keys");
  }
  std::array<char, 64> group{};
  size_t group_length = 0;
  if (EVP_PKEY_get_group_name(key, group.data(), group.size(), &group_length) != 1 ||
      std::string_view(group.data(), group_length) != kCurveName) {
    return KeyInvalid(std::string(what) + " is an EC key on curve " +
                      std::string(group.data(), group_length) +
                      "; release signatures use P-256 (prime256v1)");
  }
  return OkStatus();
}

Result<EvpPkeyPtr> LoadPrivateKey(std::string_view pem) {
  if (pem.find("-----BEGIN ENCRYPTED") != std::string_view::npos) {
    return KeyInvalid(
        "the private key is encrypted; give an unencrypted PKCS#8 PEM key (as `expanse release "
        "keygen` writes)");
  }
  BioPtr bio = MemoryBio(pem);
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return KeyInvalid("the private key is not a PEM private key");
  }
  EXPANSE_RETURN_IF_ERROR(CheckP256(key.get(), "the private key"));
  return key;
}

Result<EvpPkeyPtr> LoadPublicKey(std::string_view pem) {
  BioPtr bio = MemoryBio(pem);
  EvpPkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return KeyInvalid("the public key is not a PEM public key (-----BEGIN PUBLIC KEY-----)");
  }
  EXPANSE_RETURN_IF_ERROR(CheckP256(key.get(), "the public key"));
  return key;
}

Result<std::string> BioContents(BIO* bio) {
  char* data = nullptr;
  long length = BIO_get_mem_data(bio, &data);
  if (length <= 0 || data == nullptr) {
    return InternalError("OpenSSL wrote an empty PEM");
  }
  return std::string(data, static_cast<size_t>(length));
}

std::string_view TrimWhitespace(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// A strict DER ECDSA-Sig-Value: it parses, nothing follows it, and it re-encodes to the same
// bytes (so one signature has exactly one accepted encoding).
Status CheckCanonicalDer(std::string_view der) {
  const auto* cursor = reinterpret_cast<const unsigned char*>(der.data());
  EcdsaSigPtr sig(d2i_ECDSA_SIG(nullptr, &cursor, static_cast<long>(der.size())));
  ERR_clear_error();
  if (sig == nullptr || cursor != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
    return SignatureMalformed("the signature is not a DER-encoded ECDSA signature");
  }
  unsigned char* reencoded = nullptr;
  int length = i2d_ECDSA_SIG(sig.get(), &reencoded);
  bool same = length > 0 && static_cast<size_t>(length) == der.size() &&
              std::string_view(reinterpret_cast<char*>(reencoded), der.size()) == der;
  OPENSSL_free(reencoded);
  if (!same) {
    return SignatureMalformed("the signature is not in canonical DER form");
  }
  return OkStatus();
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  crypto_internal::EnsureSodiumInitialized();
  // sodium_base64_ENCODED_LEN counts the NUL that sodium_bin2base64 writes.
  std::string text(sodium_base64_ENCODED_LEN(bytes.size(), kBase64Variant), '\0');
  sodium_bin2base64(text.data(), text.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), kBase64Variant);
  text.resize(text.size() - 1);
  return text;
}

Result<std::string> Base64Decode(std::string_view text) {
  crypto_internal::EnsureSodiumInitialized();
  std::string bytes(text.size() / 4 * 3 + 3, '\0');  // never empty, so data() is not null
  size_t decoded_length = 0;
  const char* end = nullptr;
  const int rc =
      sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                        text.size(), /*ignore=*/nullptr, &decoded_length, &end, kBase64Variant);
  // libsodium reports success for the prefix before the first foreign byte.
  if (rc != 0 || end != text.data() + text.size()) {
    return InvalidArgumentError("invalid base64 text (" + std::to_string(text.size()) +
                                " characters): expected A-Z a-z 0-9 + / with = padding");
  }
  bytes.resize(decoded_length);
  return bytes;
}

Result<SigningKeyPair> GenerateSigningKey() {
  // Spelled out rather than EVP_EC_gen, whose macro casts away const (a -Wcast-qual error).
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* generated = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_group_name(ctx.get(), "P-256") != 1 ||
      EVP_PKEY_generate(ctx.get(), &generated) != 1) {
    generated = nullptr;
  }
  EvpPkeyPtr key(generated);
  if (key == nullptr) {
    ERR_clear_error();
    return InternalError("OpenSSL could not generate a P-256 key");
  }
  BioPtr private_bio(BIO_new(BIO_s_mem()));
  BioPtr public_bio(BIO_new(BIO_s_mem()));
  // OpenSSL 3 writes PEM_write_bio_PrivateKey as PKCS#8 ("BEGIN PRIVATE KEY").
  if (private_bio == nullptr || public_bio == nullptr ||
      PEM_write_bio_PrivateKey(private_bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) != 1 ||
      PEM_write_bio_PUBKEY(public_bio.get(), key.get()) != 1) {
    ERR_clear_error();
    return InternalError("OpenSSL could not write the new key as PEM");
  }
  SigningKeyPair pair;
  EXPANSE_ASSIGN_OR_RETURN(pair.private_key_pem, BioContents(private_bio.get()));
  EXPANSE_ASSIGN_OR_RETURN(pair.public_key_pem, BioContents(public_bio.get()));
  return pair;
}

Result<std::string> SignBlob(std::string_view private_key_pem, std::string_view data) {
  EXPANSE_ASSIGN_OR_RETURN(EvpPkeyPtr key, LoadPrivateKey(private_key_pem));
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  size_t length = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  if (ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &length, bytes, data.size()) != 1) {
    ERR_clear_error();
    return InternalError("OpenSSL could not start an ECDSA signature");
  }
  std::string der(length, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(der.data()), &length, bytes,
                     data.size()) != 1) {
    ERR_clear_error();
    return InternalError("OpenSSL could not sign");
  }
  der.resize(length);
  return Base64Encode(der);
}

Status CheckPublicKey(std::string_view public_key_pem) {
  return LoadPublicKey(public_key_pem).status();
}

Status VerifyBlob(std::string_view public_key_pem, std::string_view data,
                  std::string_view signature_base64) {
  EXPANSE_ASSIGN_OR_RETURN(EvpPkeyPtr key, LoadPublicKey(public_key_pem));
  std::string_view text = TrimWhitespace(signature_base64);
  if (text.empty()) {
    return SignatureMalformed("the signature is empty");
  }
  if (text.size() > kMaxSignatureTextBytes) {
    return SignatureMalformed("the signature is " + std::to_string(text.size()) +
                              " characters long; an ECDSA P-256 signature is about 96");
  }
  Result<std::string> der = Base64Decode(text);
  if (!der.ok()) {
    return SignatureMalformed("the signature is not base64: " + der.status().message());
  }
  EXPANSE_RETURN_IF_ERROR(CheckCanonicalDer(*der));

  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
    ERR_clear_error();
    return InternalError("OpenSSL could not start an ECDSA verification");
  }
  const int rc =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(der->data()), der->size(),
                       reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ERR_clear_error();
  if (rc == 1) {
    return OkStatus();
  }
  if (rc == 0) {
    return UnauthenticatedError(
               "the signature does not match: the file was changed after signing, or it was "
               "signed by another key")
        .WithReason("signature_mismatch");
  }
  return SignatureMalformed("OpenSSL could not check the signature (malformed values)");
}

Result<std::string> PublicKeyOf(std::string_view private_key_pem) {
  EXPANSE_ASSIGN_OR_RETURN(EvpPkeyPtr key, LoadPrivateKey(private_key_pem));
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_PUBKEY(bio.get(), key.get()) != 1) {
    ERR_clear_error();
    return InternalError("OpenSSL could not write the public key as PEM");
  }
  return BioContents(bio.get());
}

}  // namespace expanse::crypto
