// manifest.json: the signed list of published releases and where their archives are.
// Format: docs/formats/release-manifest.md.

#ifndef EXPANSE_RELEASE_MANIFEST_H_
#define EXPANSE_RELEASE_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::release {

inline constexpr int kManifestFormat = 1;
inline constexpr char kManifestName[] = "manifest.json";
inline constexpr char kManifestSignatureName[] = "manifest.json.sig";
inline constexpr size_t kMaxManifestBytes = 4 << 20;
// The largest archive a manifest may list (and an installer will download).
inline constexpr uint64_t kMaxArchiveBytes = uint64_t{1} << 30;

// Where one archive is and what its bytes must be.
struct ArchiveRef {
  std::string url{};            // absolute http(s) URL of the .tar.gz
  std::string sha256;           // 64 lowercase hex digits
  uint64_t size = 0;            // bytes, 1..kMaxArchiveBytes
  std::string signature_url{};  // absolute http(s) URL of its detached .sig

  friend bool operator==(const ArchiveRef&, const ArchiveRef&) = default;
};

struct ManifestArchive {
  std::string name{};  // package, e.g. "expanse-daemon"
  std::string os{};
  std::string arch{};
  ArchiveRef ref{};

  friend bool operator==(const ManifestArchive&, const ManifestArchive&) = default;
};

struct ManifestCupti {
  std::string variant{};  // e.g. "cuda1300"
  std::string arch{};
  std::string min_driver{};  // oldest NVIDIA driver the variant runs on
  ArchiveRef ref{};

  friend bool operator==(const ManifestCupti&, const ManifestCupti&) = default;
};

struct ManifestRelease {
  std::string version{};
  int64_t published_ms = 0;  // Unix epoch ms
  std::vector<ManifestArchive> archives{};
  std::vector<ManifestCupti> cupti{};

  friend bool operator==(const ManifestRelease&, const ManifestRelease&) = default;
};

struct Manifest {
  std::vector<ManifestRelease> releases{};

  friend bool operator==(const Manifest&, const Manifest&) = default;
};

// Strict parse: format 1, every field present and valid (absolute http(s) URLs, 64-hex
// sha256, sizes 1..kMaxArchiveBytes, valid versions and driver versions), no version listed
// twice, no (name, os, arch) or (variant, arch) twice within a release. Members it does not
// know are ignored. kInvalidArgument naming the field, e.g.
// "releases[0].archives[1].url \"daemon.tar.gz\" is not an absolute http(s) URL"; an unknown
// format has reason "unsupported_format".
Result<Manifest> ParseManifest(std::string_view text);

// Deterministic rendering (fixed member order, two-space indent, trailing newline). Parsing
// the result gives back `manifest`.
std::string RenderManifest(const Manifest& manifest);

// Checks what ParseManifest checks, on a manifest built in memory.
Status ValidateManifest(const Manifest& manifest);

// True for an absolute http:// or https:// URL with a host and no user:password.
bool IsAbsoluteHttpUrl(std::string_view url);

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_MANIFEST_H_
