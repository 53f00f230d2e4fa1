// Internal to the http module: RAII owners for OpenSSL objects and error text.

#ifndef EXPANSE_HTTP_OPENSSL_UTIL_H_
#define EXPANSE_HTTP_OPENSSL_UTIL_H_

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace expanse::http_internal {

template <auto kFree>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* object) const {
    kFree(object);
  }
};

using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<BIO_free_all>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY_free>>;
using EvpPkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpenSslDeleter<EVP_PKEY_CTX_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<X509_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpenSslDeleter<X509_EXTENSION_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpenSslDeleter<X509_STORE_free>>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpenSslDeleter<X509_STORE_CTX_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslDeleter<GENERAL_NAMES_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslDeleter<BN_free>>;

// The reasons queued by the failing OpenSSL calls on this thread, oldest first and
// joined by "; ", and clears the queue. "unknown OpenSSL error" when it is empty.
std::string TakeOpenSslErrors();

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_OPENSSL_UTIL_H_
