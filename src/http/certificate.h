// Internal to the http module: building and checking the self-signed CA and server
// certificate behind self_signed.h, in memory (PEM text in, PEM text out).

#ifndef EXPANSE_HTTP_CERTIFICATE_H_
#define EXPANSE_HTTP_CERTIFICATE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::http_internal {

// One subjectAltName entry.
struct CertificateHost {
  std::string text;  // as the caller wrote it (DNS names lower-cased)
  bool is_ip = false;
  std::string ip_bytes;  // 4 or 16 bytes, network order, when is_ip
};

// kInvalidArgument unless `host` is an IPv4/IPv6 literal or a DNS name (labels of
// letters, digits and inner hyphens, at most 63 bytes each and 253 in all).
Result<CertificateHost> ParseCertificateHost(std::string_view host);

struct CertificateSet {
  std::string ca_pem;
  std::string server_pem;
  std::string server_key_pem;  // unencrypted PKCS#8
};

// A fresh CA and a server certificate for `hosts` (at least one), valid from an hour
// before `now_unix` (clients with slightly slow clocks) until now + validity.
Result<CertificateSet> GenerateCertificateSet(const std::vector<CertificateHost>& hosts,
                                              int64_t now_unix, std::chrono::days validity);

// Why `set` is not fit to serve `hosts` from now until now + renew_before: a file
// that does not parse, a key that does not match, a certificate the CA did not sign
// or that is not valid at those times, a missing host. Empty when it is fit.
std::string CertificateSetProblem(const CertificateSet& set,
                                  const std::vector<CertificateHost>& hosts, int64_t now_unix,
                                  std::chrono::days renew_before);

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_CERTIFICATE_H_
