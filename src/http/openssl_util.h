// Internal to the http module: RAII owners for OpenSSL objects and error text.

#ifndef EXPANSE_HTTP_OPENSSL_UTIL_H_
#define EXPANSE_HTTP_OPENSSL_UTIL_H_

#include <string>

#include <openssl/bn.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "crypto/openssl_ptr.h"

namespace expanse::http_internal {

using crypto::BioPtr;
using crypto::EvpPkeyCtxPtr;
using crypto::EvpPkeyPtr;
using crypto::OpenSslPtr;
using X509Ptr = OpenSslPtr<X509, X509_free>;
using X509ExtensionPtr = OpenSslPtr<X509_EXTENSION, X509_EXTENSION_free>;
using X509StorePtr = OpenSslPtr<X509_STORE, X509_STORE_free>;
using X509StoreCtxPtr = OpenSslPtr<X509_STORE_CTX, X509_STORE_CTX_free>;
using GeneralNamesPtr = OpenSslPtr<GENERAL_NAMES, GENERAL_NAMES_free>;
using BignumPtr = OpenSslPtr<BIGNUM, BN_free>;

// The reasons queued by the failing OpenSSL calls on this thread, oldest first and
// joined by "; ", and clears the queue. "unknown OpenSSL error" when it is empty.
std::string TakeOpenSslErrors();

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_OPENSSL_UTIL_H_
