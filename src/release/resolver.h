// The installer's side of releases: fetch and verify the signed manifest from a mirror, pick
// the daemon release and the CUPTI variant for this node, download archives with every check,
// and judge a staged --daemon-binary.
//
//   auto manifest = FetchManifest(client, "https://releases.expanse.sh", key);
//   auto chosen = SelectRelease(manifest->manifest, "1.2.0", "amd64");
//   auto cupti = SelectCuptiVariant(chosen->release, "amd64", driver, pinned);
//   DownloadVerified(client, chosen->archive.ref, key, "/var/tmp/expanse/daemon.tar.gz");
//
// The HttpClient should come from ReleaseHttpClientOptions(): archives are far larger than the
// control plane's answers.

#ifndef EXPANSE_RELEASE_RESOLVER_H_
#define EXPANSE_RELEASE_RESOLVER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/http_client.h"
#include "release/manifest.h"
#include "release/release_info.h"

namespace expanse::release {

inline constexpr char kDefaultReleasesUrl[] = "https://releases.expanse.sh";

// `base` with a response cap of kMaxArchiveBytes and a total timeout fit for downloading one.
net::HttpClientOptions ReleaseHttpClientOptions(net::HttpClientOptions base = {});

struct VerifiedManifest {
  Manifest manifest{};
  std::string url{};    // where it came from
  std::string bytes{};  // exactly the bytes the signature covers
};

// GETs <releases_url>/manifest.json and <releases_url>/manifest.json.sig, verifies the
// signature over the exact bytes with `public_key_pem`, then parses. Errors:
//   kFailedPrecondition "manifest_unsigned": the .sig is missing (HTTP 404);
//   the VerifyBlob reasons (signature_mismatch, signature_malformed, key_invalid);
//   kNotFound "manifest_not_found": no manifest.json (HTTP 404);
//   kUnavailable "mirror_error": another HTTP status; the client's errors as they are;
//   kInvalidArgument: a releases_url that is not an absolute http(s) URL, a manifest that
//   does not parse.
Result<VerifiedManifest> FetchManifest(net::HttpClient& client, std::string_view releases_url,
                                       std::string_view public_key_pem);

struct SelectedRelease {
  ManifestRelease release{};
  ManifestArchive archive{};  // `package` for `arch`
};

// The release `version` ("" or "latest": the newest release without a pre-release suffix that
// has the package for the arch) and its `package` archive for linux/`arch`. kNotFound with
// reason "release_not_found" (listing the versions there are) or "arch_not_released".
Result<SelectedRelease> SelectRelease(const Manifest& manifest, std::string_view version,
                                      std::string_view arch,
                                      std::string_view package = kDaemonPackage);

struct CuptiSelection {
  std::optional<ManifestCupti> variant{};  // nullopt: install without CUPTI
  // Why: "cuda1300 (driver 580.95.05 >= 580.65.06)" or "none: <reason>".
  std::string explanation{};
};

// The CUPTI variant for a node with NVIDIA driver `driver_version`: with `pinned` empty, the
// newest variant (by min_driver) for `arch` whose min_driver <= the driver; with `pinned`,
// that variant if the driver is new enough. No driver (nullopt or ""), a driver version that
// does not parse, or no compatible variant yield a "none: ..." selection, never an error:
// CUPTI is optional. Errors only for a pin that cannot be honoured (kFailedPrecondition
// "cupti_variant_incompatible" naming the variant's minimum and the driver; kNotFound
// "cupti_variant_not_found" naming the variant and the ones there are).
Result<CuptiSelection> SelectCuptiVariant(const std::vector<ManifestCupti>& variants,
                                          std::string_view arch,
                                          const std::optional<std::string>& driver_version,
                                          std::string_view pinned);
Result<CuptiSelection> SelectCuptiVariant(const ManifestRelease& release, std::string_view arch,
                                          const std::optional<std::string>& driver_version,
                                          std::string_view pinned);

// Downloads the archive and its signature and writes them to `dest_path` and
// `dest_path`.sig (atomically, 0644) only after: the size equals ref.size (kDataLoss
// "archive_size_mismatch"), the sha256 equals ref.sha256 ("archive_checksum_mismatch"), and
// the signature verifies (kFailedPrecondition "archive_unsigned" when the .sig is 404, else
// the VerifyBlob reasons). kFailedPrecondition when the client's response cap is below
// ref.size. Returns dest_path.
Result<std::string> DownloadVerified(net::HttpClient& client, const ArchiveRef& ref,
                                     std::string_view public_key_pem, const std::string& dest_path);

struct StagedBinary {
  enum class Kind { kArchive, kBareBinary };
  Kind kind = Kind::kBareBinary;
  std::string path{};                 // what to install from (the verified copy when one was made)
  bool verified = false;              // true only for an archive whose .sig verified
  std::optional<ReleaseInfo> info{};  // the archive's release.json
  std::string message{};              // for the operator: what was checked, or why nothing was
};

// What `--daemon-binary PATH` is: a *.tar.gz with `<path>.sig` beside it is verified (the
// signature, then the whole archive as InspectArchive checks it); a *.tar.gz without a .sig is
// refused (kFailedPrecondition "archive_unsigned"); any other regular file that is an ELF
// object or executable is a bare binary, verified=false, with a message saying it cannot be
// verified. Anything else is kInvalidArgument.
// With `verified_copy`, the archive's bytes that were verified are written there (0600) and
// checked there, and `path` in the result names that copy: the caller then unpacks exactly the
// bytes the signature covers, not a file someone could replace after the check.
Result<StagedBinary> InspectStagedBinary(const std::string& path, std::string_view public_key_pem,
                                         const std::string& verified_copy = "");

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_RESOLVER_H_
