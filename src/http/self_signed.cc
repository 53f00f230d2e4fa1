#include "http/self_signed.h"

#include <unistd.h>

#include <array>
#include <string>
#include <utility>

#include "core/file_util.h"
#include "http/certificate.h"

namespace expanse::http {

namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

int64_t NowUnix(Clock* clock) {
  if (clock != nullptr) {
    return clock->NowMs() / 1000;
  }
  SystemClock system;
  return system.NowMs() / 1000;
}

// All three files, or nullopt when any is missing (then all are regenerated).
Result<std::optional<http_internal::CertificateSet>> ReadSet(const SelfSignedFiles& files) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> ca,
                           fs::ReadSmallFile(files.ca_file, kMaxPemBytes));
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> cert,
                           fs::ReadSmallFile(files.cert_file, kMaxPemBytes));
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> key,
                           fs::ReadSmallFile(files.key_file, kMaxPemBytes));
  if (!ca || !cert || !key) {
    return std::optional<http_internal::CertificateSet>();
  }
  return std::optional<http_internal::CertificateSet>(
      http_internal::CertificateSet{std::move(*ca), std::move(*cert), std::move(*key)});
}

}  // namespace

std::vector<std::string> DefaultCertificateHosts() {
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) {
    const std::string hostname(name.data());
    const Result<http_internal::CertificateHost> parsed =
        http_internal::ParseCertificateHost(hostname);
    if (parsed.ok() && parsed->text != "localhost") {
      hosts.push_back(parsed->text);
    }
  }
  return hosts;
}

Result<SelfSignedFiles> EnsureSelfSignedCertificate(const SelfSignedOptions& options) {
  if (options.directory.empty()) {
    return InvalidArgumentError("self-signed certificate: no directory given");
  }
  if (options.validity <= options.renew_before) {
    return InvalidArgumentError(
        "self-signed certificate: validity must be longer than renew_before, or every run "
        "would replace the certificate");
  }
  std::vector<http_internal::CertificateHost> hosts;
  for (const std::string& host :
       options.hosts.empty() ? DefaultCertificateHosts() : options.hosts) {
    EXPANSE_ASSIGN_OR_RETURN(http_internal::CertificateHost parsed,
                             http_internal::ParseCertificateHost(host));
    hosts.push_back(std::move(parsed));
  }

  SelfSignedFiles files;
  files.ca_file = options.directory + "/ca.pem";
  files.cert_file = options.directory + "/server.pem";
  files.key_file = options.directory + "/server.key";
  const int64_t now = NowUnix(options.clock);

  EXPANSE_ASSIGN_OR_RETURN(std::optional<http_internal::CertificateSet> existing, ReadSet(files));
  if (existing) {
    files.reason =
        http_internal::CertificateSetProblem(*existing, hosts, now, options.renew_before);
    if (files.reason.empty()) {
      return files;
    }
  } else {
    files.reason = "no complete set of ca.pem, server.pem and server.key";
  }

  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(options.directory, 0755));
  EXPANSE_ASSIGN_OR_RETURN(const http_internal::CertificateSet set,
                           http_internal::GenerateCertificateSet(hosts, now, options.validity));
  // The key goes first and ca.pem last. After a crash part way, the next run finds a
  // set that does not verify and starts over.
  EXPANSE_RETURN_IF_ERROR(
      fs::WriteFileAtomically(options.directory, "server.key", set.server_key_pem, 0600));
  EXPANSE_RETURN_IF_ERROR(
      fs::WriteFileAtomically(options.directory, "server.pem", set.server_pem, 0644));
  EXPANSE_RETURN_IF_ERROR(fs::WriteFileAtomically(options.directory, "ca.pem", set.ca_pem, 0644));
  files.generated = true;
  return files;
}

Status WriteSelfSignedCertificate(const SelfSignedOptions& options) {
  return EnsureSelfSignedCertificate(options).status();
}

}  // namespace expanse::http
