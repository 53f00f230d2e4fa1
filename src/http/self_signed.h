// Self-signed TLS for a first run, so expanse-server never has to serve plain HTTP
// off loopback while the operator has no real certificate yet.
//
// The function makes a small private CA and a server certificate signed by it (both
// ECDSA P-256, SHA-256) and writes three files into one directory:
//   ca.pem      the CA certificate: what clients trust (SSL_CERT_FILE, --cacert);
//   server.pem  the server certificate, with subjectAltName for every requested host;
//   server.key  its private key, mode 0600.
// The CA's private key is never written: it signs the one server certificate and is
// dropped, so the CA can vouch for nothing else. The price is that a replacement
// server certificate comes with a new CA, and clients must be given the new ca.pem.

#ifndef EXPANSE_HTTP_SELF_SIGNED_H_
#define EXPANSE_HTTP_SELF_SIGNED_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/status.h"

namespace expanse::http {

struct SelfSignedOptions {
  // Holds the three files; created (0755) when missing. Other files in it are left
  // alone, but the three names belong to this function.
  std::string directory{};
  // DNS names and IP literals the certificate must cover; empty means
  // DefaultCertificateHosts().
  std::vector<std::string> hosts{};
  std::chrono::days validity{3 * 365};
  // Existing files are reused only if they stay valid at least this much longer.
  std::chrono::days renew_before{30};
  Clock* clock = nullptr;  // null: the system clock
};

struct SelfSignedFiles {
  std::string ca_file{};    // <directory>/ca.pem
  std::string cert_file{};  // <directory>/server.pem
  std::string key_file{};   // <directory>/server.key
  // True when new files were written (clients need the new ca.pem); false when
  // valid existing files were kept.
  bool generated = false;
  // Why new files were written, e.g. "server.pem does not cover 10.0.0.5"; empty
  // when kept.
  std::string reason{};
};

// localhost, 127.0.0.1, ::1 and this machine's host name (when it is a valid DNS
// name).
std::vector<std::string> DefaultCertificateHosts();

// Keeps the files in options.directory if they are a matching CA, certificate and
// key that cover every requested host and stay valid for renew_before; otherwise
// generates all three and replaces them, each atomically (temporary file, fsync,
// rename, fsync of the directory). kInvalidArgument for a host that is neither an IP
// literal nor a DNS name; other codes for file-system failures. A file that exists
// but cannot be read is an error, not a reason to overwrite it.
Result<SelfSignedFiles> EnsureSelfSignedCertificate(const SelfSignedOptions& options);

// EnsureSelfSignedCertificate for callers that need only success or failure.
Status WriteSelfSignedCertificate(const SelfSignedOptions& options);

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_SELF_SIGNED_H_
