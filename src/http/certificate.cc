#include "http/certificate.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <string>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "http/openssl_util.h"

namespace expanse::http_internal {

namespace {

constexpr int64_t kBackdateSeconds = 3600;

int64_t Seconds(std::chrono::days days) {
  return std::chrono::duration_cast<std::chrono::seconds>(days).count();
}

bool IsDnsName(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  size_t label_start = 0;
  while (label_start <= name.size()) {
    size_t label_end = name.find('.', label_start);
    if (label_end == std::string_view::npos) {
      label_end = name.size();
    }
    const std::string_view label = name.substr(label_start, label_end - label_start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (const char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
        return false;
      }
    }
    label_start = label_end + 1;
  }
  return true;
}

std::string ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return {};
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return {};
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

X509Ptr ParseCertificate(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

EvpPkeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return EvpPkeyPtr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Result<EvpPkeyPtr> NewP256Key() {
  EvpPkeyCtxPtr context(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* key = nullptr;
  if (!context || EVP_PKEY_keygen_init(context.get()) != 1 ||
      EVP_PKEY_CTX_set_group_name(context.get(), "P-256") != 1 ||
      EVP_PKEY_generate(context.get(), &key) != 1) {
    return InternalError("cannot generate an ECDSA P-256 key: " + TakeOpenSslErrors());
  }
  return EvpPkeyPtr(key);
}

// Adds an extension written in OpenSSL's configuration syntax; `value` is always a
// constant of ours, never outside input.
bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509ExtensionPtr extension(X509V3_EXT_nconf_nid(nullptr, &context, nid, value));
  return extension && X509_add_ext(cert, extension.get(), -1) == 1;
}

bool AddSubjectAltNames(X509* cert, const std::vector<CertificateHost>& hosts) {
  GeneralNamesPtr names(GENERAL_NAMES_new());
  if (!names) {
    return false;
  }
  for (const CertificateHost& host : hosts) {
    GENERAL_NAME* name = GENERAL_NAME_new();
    ASN1_STRING* value = ASN1_STRING_type_new(host.is_ip ? V_ASN1_OCTET_STRING : V_ASN1_IA5STRING);
    const std::string& bytes = host.is_ip ? host.ip_bytes : host.text;
    if (name == nullptr || value == nullptr ||
        ASN1_STRING_set(value, bytes.data(), static_cast<int>(bytes.size())) != 1) {
      GENERAL_NAME_free(name);
      ASN1_STRING_free(value);
      return false;
    }
    GENERAL_NAME_set0_value(name, host.is_ip ? GEN_IPADD : GEN_DNS, value);
    if (sk_GENERAL_NAME_push(names.get(), name) == 0) {
      GENERAL_NAME_free(name);
      return false;
    }
  }
  return X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) == 1;
}

// A certificate with a random 127-bit serial, the given subject common name, validity
// and public key; issuer and extensions are the caller's.
X509Ptr NewCertificate(const std::string& common_name, int64_t not_before, int64_t not_after,
                       EVP_PKEY* key) {
  X509Ptr cert(X509_new());
  std::array<unsigned char, 16> serial{};
  if (!cert || RAND_bytes(serial.data(), serial.size()) != 1) {
    return nullptr;
  }
  serial[0] &= 0x7f;  // serials are positive
  BignumPtr serial_number(BN_bin2bn(serial.data(), serial.size(), nullptr));
  X509_NAME* name = X509_get_subject_name(cert.get());
  const auto* cn = reinterpret_cast<const unsigned char*>(common_name.c_str());
  const auto* organisation = reinterpret_cast<const unsigned char*>("Expanse");
  if (!serial_number || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      BN_to_ASN1_INTEGER(serial_number.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(not_after)) == nullptr ||
      X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, organisation, -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, cn, -1, -1, 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return nullptr;
  }
  return cert;
}

}  // namespace

Result<CertificateHost> ParseCertificateHost(std::string_view host) {
  CertificateHost parsed;
  parsed.text = std::string(host);
  in6_addr v6{};
  in_addr v4{};
  if (inet_pton(AF_INET, parsed.text.c_str(), &v4) == 1) {
    parsed.is_ip = true;
    parsed.ip_bytes.assign(reinterpret_cast<const char*>(&v4), sizeof(v4));
    return parsed;
  }
  if (inet_pton(AF_INET6, parsed.text.c_str(), &v6) == 1) {
    parsed.is_ip = true;
    parsed.ip_bytes.assign(reinterpret_cast<const char*>(&v6), sizeof(v6));
    return parsed;
  }
  if (!IsDnsName(host)) {
    std::string shown(host.substr(0, 80));
    std::replace_if(
        shown.begin(), shown.end(), [](unsigned char c) { return !std::isprint(c); }, '?');
    return InvalidArgumentError("certificate host \"" + shown +
                                "\" is neither an IP address nor a DNS name");
  }
  std::transform(parsed.text.begin(), parsed.text.end(), parsed.text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return parsed;
}

Result<CertificateSet> GenerateCertificateSet(const std::vector<CertificateHost>& hosts,
                                              int64_t now_unix, std::chrono::days validity) {
  if (hosts.empty()) {
    return InvalidArgumentError("a certificate needs at least one host");
  }
  const int64_t not_before = now_unix - kBackdateSeconds;
  const int64_t not_after = now_unix + Seconds(validity);
  const auto failed = [](std::string_view what) {
    return InternalError("cannot create the self-signed " + std::string(what) + ": " +
                         TakeOpenSslErrors());
  };

  EXPANSE_ASSIGN_OR_RETURN(EvpPkeyPtr ca_key, NewP256Key());
  EXPANSE_ASSIGN_OR_RETURN(EvpPkeyPtr server_key, NewP256Key());

  // The random suffix tells CAs from different runs apart in a client's error message.
  std::array<unsigned char, 4> tag{};
  if (RAND_bytes(tag.data(), tag.size()) != 1) {
    return failed("CA name");
  }
  char tag_hex[9];
  std::snprintf(tag_hex, sizeof(tag_hex), "%02x%02x%02x%02x", tag[0], tag[1], tag[2], tag[3]);
  X509Ptr ca = NewCertificate(std::string("Expanse self-signed CA ") + tag_hex, not_before,
                              not_after, ca_key.get());
  if (!ca || X509_set_issuer_name(ca.get(), X509_get_subject_name(ca.get())) != 1 ||
      !AddExtension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(ca.get(), ca.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(ca.get(), ca_key.get(), EVP_sha256()) == 0) {
    return failed("CA certificate");
  }

  X509Ptr server = NewCertificate(hosts.front().text, not_before, not_after, server_key.get());
  if (!server || X509_set_issuer_name(server.get(), X509_get_subject_name(ca.get())) != 1 ||
      !AddExtension(server.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(server.get(), ca.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(server.get(), ca.get(), NID_ext_key_usage, "serverAuth") ||
      !AddExtension(server.get(), ca.get(), NID_subject_key_identifier, "hash") ||
      !AddExtension(server.get(), ca.get(), NID_authority_key_identifier, "keyid:always") ||
      !AddSubjectAltNames(server.get(), hosts) ||
      X509_sign(server.get(), ca_key.get(), EVP_sha256()) == 0) {
    return failed("server certificate");
  }

  CertificateSet set{ToPem(ca.get()), ToPem(server.get()), KeyToPem(server_key.get())};
  if (set.ca_pem.empty() || set.server_pem.empty() || set.server_key_pem.empty()) {
    return failed("PEM files");
  }
  return set;
}

std::string CertificateSetProblem(const CertificateSet& set,
                                  const std::vector<CertificateHost>& hosts, int64_t now_unix,
                                  std::chrono::days renew_before) {
  const X509Ptr ca = ParseCertificate(set.ca_pem);
  const X509Ptr server = ParseCertificate(set.server_pem);
  const EvpPkeyPtr key = ParseKey(set.server_key_pem);
  ERR_clear_error();  // parse failures are answered below, not left queued
  if (!ca) {
    return "ca.pem holds no PEM certificate";
  }
  if (!server) {
    return "server.pem holds no PEM certificate";
  }
  if (!key) {
    return "server.key holds no PEM private key";
  }
  if (X509_check_private_key(server.get(), key.get()) != 1) {
    ERR_clear_error();
    return "server.key does not belong to server.pem";
  }

  // Chain, CA flags, key usage and validity, checked as a TLS client would, at `now`.
  X509StorePtr store(X509_STORE_new());
  X509StoreCtxPtr context(X509_STORE_CTX_new());
  if (!store || !context || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(context.get(), store.get(), server.get(), nullptr) != 1) {
    ERR_clear_error();
    return "cannot set up certificate verification";
  }
  X509_STORE_CTX_set_purpose(context.get(), X509_PURPOSE_SSL_SERVER);
  X509_STORE_CTX_set_time(context.get(), 0, static_cast<time_t>(now_unix));
  if (X509_verify_cert(context.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(context.get());
    ERR_clear_error();
    return std::string("server.pem does not verify against ca.pem: ") +
           X509_verify_cert_error_string(error);
  }

  const time_t renew_at = static_cast<time_t>(now_unix + Seconds(renew_before));
  for (X509* cert : {ca.get(), server.get()}) {
    time_t limit = renew_at;
    if (X509_cmp_time(X509_get0_notAfter(cert), &limit) <= 0) {
      return std::string(cert == ca.get() ? "ca.pem" : "server.pem") + " expires within " +
             std::to_string(renew_before.count()) + " days";
    }
  }

  for (const CertificateHost& host : hosts) {
    const int covered =
        host.is_ip ? X509_check_ip(server.get(),
                                   reinterpret_cast<const unsigned char*>(host.ip_bytes.data()),
                                   host.ip_bytes.size(), 0)
                   : X509_check_host(server.get(), host.text.data(), host.text.size(),
                                     X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr);
    if (covered != 1) {
      ERR_clear_error();
      return "server.pem does not cover " + host.text;
    }
  }
  return {};
}

}  // namespace expanse::http_internal
