#include "release/manifest_build.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/quote.h"
#include "core/version_compare.h"
#include "crypto/ecdsa.h"
#include "crypto/hash.h"
#include "release/archive_extract.h"
#include "release/file_io.h"
#include "release/release_info.h"
#include "release/status_util.h"

namespace expanse::release {
namespace {

// Versions already published in `dir`/manifest.json, with their dates.
Result<std::map<std::string, int64_t>> PublishedDates(const std::string& dir) {
  std::map<std::string, int64_t> dates;
  Result<std::string> existing =
      release_internal::ReadWholeFile(dir + "/" + kManifestName, kMaxManifestBytes);
  if (existing.status().code() == StatusCode::kNotFound)
    return dates;
  EXPANSE_RETURN_IF_ERROR(existing);
  Result<Manifest> parsed = ParseManifest(*existing);
  if (!parsed.ok()) {
    return InvalidArgumentError("the existing " + dir + "/manifest.json does not parse (" +
                                parsed.status().message() +
                                "); fix or remove it, since it holds the publication dates");
  }
  for (const ManifestRelease& release : parsed->releases)
    dates[release.version] = release.published_ms;
  return dates;
}

Result<std::vector<std::string>> ArchiveNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    std::string name = it->path().filename().string();
    if (name.starts_with(".") || !name.ends_with(kArchiveSuffix))
      continue;
    names.push_back(name);
  }
  if (error)
    return FailedPreconditionError("reading " + dir + ": " + error.message());
  std::sort(names.begin(), names.end());
  return names;
}

Result<ArchiveRef> DescribeArchive(const BuildManifestOptions& options, const std::string& name,
                                   const std::string& base_url, ReleaseInfo* info) {
  const std::string path = options.dir + "/" + name;
  EXPANSE_ASSIGN_OR_RETURN(*info, release_internal::Annotate(InspectArchive(path), name + ": "));
  if (ArchiveFileName(*info) != name) {
    return InvalidArgumentError(name + " holds " + ArchiveFileName(*info) +
                                " (by its release.json); archives keep the name they were "
                                "packed under");
  }
  Result<std::string> signature =
      release_internal::ReadWholeFile(path + kSignatureSuffix, kMaxSignatureFileBytes);
  if (signature.status().code() == StatusCode::kNotFound) {
    return FailedPreconditionError(name + " has no " + name + kSignatureSuffix +
                                   " beside it; sign it first")
        .WithReason("archive_unsigned");
  }
  EXPANSE_RETURN_IF_ERROR(signature);
  EXPANSE_ASSIGN_OR_RETURN(std::string bytes,
                           release_internal::ReadWholeFile(path, kMaxArchiveBytes));
  if (!options.public_key_pem.empty()) {
    EXPANSE_RETURN_IF_ERROR(release_internal::Annotate(
        crypto::VerifyBlob(options.public_key_pem, bytes, *signature), name + ": "));
  }
  if (bytes.empty())
    return InvalidArgumentError(name + " is empty");
  return ArchiveRef{.url = base_url + "/" + name,
                    .sha256 = crypto::Sha256Hex(bytes),
                    .size = bytes.size(),
                    .signature_url = base_url + "/" + name + kSignatureSuffix};
}

}  // namespace

Result<Manifest> BuildManifest(const BuildManifestOptions& options) {
  std::string base_url = options.base_url;
  while (base_url.ends_with('/'))
    base_url.pop_back();
  if (!IsAbsoluteHttpUrl(base_url)) {
    return InvalidArgumentError("base URL " + QuoteForMessage(options.base_url, 200) +
                                " is not an absolute http(s) URL, e.g. "
                                "https://releases.example.com/expanse");
  }
  EXPANSE_ASSIGN_OR_RETURN(auto dates, PublishedDates(options.dir));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names, ArchiveNames(options.dir));

  std::map<std::string, ManifestRelease> by_version;
  for (const std::string& name : names) {
    ReleaseInfo info;
    EXPANSE_ASSIGN_OR_RETURN(ArchiveRef ref, DescribeArchive(options, name, base_url, &info));
    ManifestRelease& release = by_version[info.version];
    release.version = info.version;
    auto date = dates.find(info.version);
    release.published_ms = date != dates.end() ? date->second : options.now_ms;
    if (info.variant.empty()) {
      release.archives.push_back(ManifestArchive{info.name, info.os, info.arch, ref});
    } else {
      if (info.os != "linux") {
        return InvalidArgumentError(name + ": CUPTI builds are for linux, not " + info.os);
      }
      release.cupti.push_back(ManifestCupti{info.variant, info.arch, info.min_driver, ref});
    }
  }

  Manifest manifest;
  for (auto& [version, release] : by_version) {
    std::sort(release.archives.begin(), release.archives.end(), [](const auto& a, const auto& b) {
      return std::tie(a.name, a.os, a.arch) < std::tie(b.name, b.os, b.arch);
    });
    std::sort(release.cupti.begin(), release.cupti.end(), [](const auto& a, const auto& b) {
      return std::tie(a.variant, a.arch) < std::tie(b.variant, b.arch);
    });
    manifest.releases.push_back(std::move(release));
  }
  std::sort(manifest.releases.begin(), manifest.releases.end(),
            [](const ManifestRelease& a, const ManifestRelease& b) {
              return CompareVersions(a.version, b.version) > 0;
            });
  EXPANSE_RETURN_IF_ERROR(ValidateManifest(manifest));
  EXPANSE_RETURN_IF_ERROR(release_internal::ReplaceFile(options.dir + "/" + kManifestName,
                                                        RenderManifest(manifest), 0644));
  return manifest;
}

}  // namespace expanse::release
