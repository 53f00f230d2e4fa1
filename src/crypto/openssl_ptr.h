// unique_ptr owners for OpenSSL objects, shared by the modules that call OpenSSL directly
// (crypto for ECDSA, http for certificates and TLS). Header-only: it adds no link dependency,
// but its users must link OpenSSL themselves.
#ifndef EXPANSE_CRYPTO_OPENSSL_PTR_H_
#define EXPANSE_CRYPTO_OPENSSL_PTR_H_

#include <memory>

#include <openssl/bio.h>
#include <openssl/evp.h>

namespace expanse::crypto {

// Calls OpenSSL's own free function (`kFree`) for the object; each type has its own.
template <auto kFree>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* object) const {
    kFree(object);
  }
};

// OpenSslPtr<X509, X509_free> owns an X509 and frees it with X509_free.
template <typename T, auto kFree>
using OpenSslPtr = std::unique_ptr<T, OpenSslDeleter<kFree>>;

using BioPtr = OpenSslPtr<BIO, BIO_free_all>;
using EvpPkeyPtr = OpenSslPtr<EVP_PKEY, EVP_PKEY_free>;
using EvpPkeyCtxPtr = OpenSslPtr<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using EvpMdCtxPtr = OpenSslPtr<EVP_MD_CTX, EVP_MD_CTX_free>;

}  // namespace expanse::crypto

#endif  // EXPANSE_CRYPTO_OPENSSL_PTR_H_
