// release.json, the description every release archive carries of itself, and the naming
// rules shared by archives and the manifest. Format: docs/formats/release-archive.md.

#ifndef EXPANSE_RELEASE_RELEASE_INFO_H_
#define EXPANSE_RELEASE_RELEASE_INFO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::release {

inline constexpr int kReleaseInfoFormat = 1;
inline constexpr char kReleaseInfoName[] = "release.json";  // at the archive's top level
inline constexpr size_t kMaxReleaseInfoBytes = 1 << 20;
inline constexpr char kDaemonPackage[] = "expanse-daemon";
inline constexpr char kCuptiPackage[] = "expanse-cupti";
inline constexpr char kSignatureSuffix[] = ".sig";
// A detached signature file is a few hundred bytes; more is not one.
inline constexpr size_t kMaxSignatureFileBytes = 4096;
inline constexpr char kArchiveSuffix[] = ".tar.gz";

// The only two modes a file in a release has.
inline constexpr uint32_t kExecutableMode = 0755;
inline constexpr uint32_t kRegularMode = 0644;

struct ReleaseFile {
  std::string path{};  // relative, '/'-separated (see IsValidArchivePath)
  std::string sha256;  // 64 lowercase hex digits
  uint64_t size = 0;
  uint32_t mode = kRegularMode;  // kExecutableMode or kRegularMode

  friend bool operator==(const ReleaseFile&, const ReleaseFile&) = default;
};

struct ReleaseInfo {
  std::string name{};     // package: "expanse-daemon", "expanse-cupti", ...
  std::string version{};  // IsValidVersion
  std::string os = "linux";
  std::string arch = "amd64";
  std::string variant{};             // CUPTI builds only, e.g. "cuda1300"; "" otherwise
  std::string min_driver{};          // with variant: the oldest NVIDIA driver it runs on
  std::vector<ReleaseFile> files{};  // sorted by path; release.json itself is not listed

  friend bool operator==(const ReleaseInfo&, const ReleaseInfo&) = default;
};

// Package names: 1..64 of [a-z0-9-], starting with a letter.
bool IsValidPackageName(std::string_view name);
// os and arch: 1..16 of [a-z0-9_]. Variants: 1..32 of [a-z0-9_].
bool IsValidPlatformWord(std::string_view word);
bool IsValidVariant(std::string_view variant);
bool IsValidSha256Hex(std::string_view hex);
// A path inside a release: 1..1024 bytes of '/'-separated components, each 1..255 bytes of
// printable ASCII other than space and '\\'; no leading or trailing '/', no empty, "." or ".."
// component.
bool IsValidArchivePath(std::string_view path);

// "<name>_<version>[_<variant>]_<os>_<arch>.tar.gz", e.g.
// "expanse-cupti_1.2.0_cuda1300_linux_amd64.tar.gz".
std::string ArchiveFileName(const ReleaseInfo& info);

// Checks every field, file list included (sorted, unique, no release.json). kInvalidArgument
// naming the field.
Status ValidateReleaseInfo(const ReleaseInfo& info);

// Strict parse of release.json: a JSON object with format 1 and valid fields; members it does
// not know are ignored. kInvalidArgument naming the field.
Result<ReleaseInfo> ParseReleaseInfo(std::string_view text);
// Deterministic rendering (fixed member order, two-space indent, trailing newline).
std::string RenderReleaseInfo(const ReleaseInfo& info);

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_RELEASE_INFO_H_
