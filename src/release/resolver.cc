#include "release/resolver.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "core/file_util.h"
#include "core/quote.h"
#include "core/version_compare.h"
#include "crypto/ecdsa.h"
#include "crypto/hash.h"
#include "release/archive_extract.h"
#include "release/file_io.h"
#include "release/status_util.h"

namespace expanse::release {

using release_internal::Annotate;

namespace {

constexpr size_t kMaxSignatureBytes = 4096;

struct Fetched {
  int status = 0;
  std::string body;
};

// `max_bytes`: the most this document may be (0: the client's limit, an archive's size).
Result<Fetched> Get(net::HttpClient& client, const std::string& url, size_t max_bytes = 0) {
  EXPANSE_ASSIGN_OR_RETURN(
      net::HttpResponse response,
      client.Send({.method = "GET", .url = url, .max_response_bytes = max_bytes}));
  if (response.status != 200 && response.status != 404) {
    return UnavailableError("GET " + url + " answered HTTP " + std::to_string(response.status))
        .WithReason("mirror_error");
  }
  return Fetched{response.status, std::move(response.body)};
}

std::string JoinVersions(const Manifest& manifest) {
  std::string list;
  for (const ManifestRelease& release : manifest.releases)
    list += (list.empty() ? "" : ", ") + release.version;
  return list.empty() ? "none" : list;
}

std::string JoinVariants(const std::vector<ManifestCupti>& variants, std::string_view arch) {
  std::string list;
  for (const ManifestCupti& c : variants) {
    if (c.arch == arch)
      list += (list.empty() ? "" : ", ") + c.variant + " (driver >= " + c.min_driver + ")";
  }
  return list.empty() ? "none" : list;
}

const ManifestArchive* FindArchive(const ManifestRelease& release, std::string_view package,
                                   std::string_view arch) {
  for (const ManifestArchive& a : release.archives) {
    if (a.name == package && a.os == "linux" && a.arch == arch)
      return &a;
  }
  return nullptr;
}

Result<bool> StartsWithElfMagic(const std::string& path) {
  fs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid())
    return fs::ErrnoStatus(errno, "open " + path);
  char magic[4] = {};
  ssize_t n = ::read(fd.get(), magic, sizeof(magic));
  if (n < 0)
    return fs::ErrnoStatus(errno, "read " + path);
  return n == 4 && std::string_view(magic, 4) ==
                       "\x7f"
                       "ELF";
}

CuptiSelection None(std::string reason) { return CuptiSelection{std::nullopt, "none: " + reason}; }

}  // namespace

net::HttpClientOptions ReleaseHttpClientOptions(net::HttpClientOptions base) {
  base.max_response_bytes = kMaxArchiveBytes;
  base.total_timeout =
      std::max(base.total_timeout, std::chrono::milliseconds(std::chrono::minutes(15)));
  return base;
}

Result<VerifiedManifest> FetchManifest(net::HttpClient& client, std::string_view releases_url,
                                       std::string_view public_key_pem) {
  std::string base(releases_url);
  while (base.ends_with('/'))
    base.pop_back();
  if (!IsAbsoluteHttpUrl(base)) {
    return InvalidArgumentError("releases URL " + QuoteForMessage(releases_url, 200) +
                                " is not an absolute http(s) URL");
  }
  VerifiedManifest verified;
  verified.url = base + "/" + kManifestName;
  // The manifest and its signature are small: a mirror's gigabyte for either is refused as it
  // arrives, not held whole and measured after (the client is made for archives).
  EXPANSE_ASSIGN_OR_RETURN(Fetched manifest, Get(client, verified.url, kMaxManifestBytes + 1));
  if (manifest.status == 404) {
    return NotFoundError("no release manifest at " + verified.url + " (HTTP 404)")
        .WithReason("manifest_not_found");
  }
  if (manifest.body.size() > kMaxManifestBytes) {
    return ResourceExhaustedError(verified.url + " is larger than " +
                                  std::to_string(kMaxManifestBytes) + " bytes");
  }
  const std::string signature_url = base + "/" + kManifestSignatureName;
  // 64 KiB, not the signature's 4 KiB: a mirror's 404 page for a missing .sig (~9 KiB on
  // GitHub Pages) must still read as "unsigned", not as a refused answer.
  EXPANSE_ASSIGN_OR_RETURN(Fetched signature, Get(client, signature_url, 64 << 10));
  if (signature.status == 404) {
    return FailedPreconditionError(verified.url + " has no signature (" + signature_url +
                                   " is missing); an unsigned manifest is never trusted")
        .WithReason("manifest_unsigned");
  }
  if (signature.body.size() > kMaxSignatureBytes)
    return InvalidArgumentError(signature_url + " is too large to be a signature")
        .WithReason("signature_malformed");
  EXPANSE_RETURN_IF_ERROR(
      Annotate(crypto::VerifyBlob(public_key_pem, manifest.body, signature.body),
               "release manifest " + verified.url + ": "));
  EXPANSE_ASSIGN_OR_RETURN(verified.manifest,
                           Annotate(ParseManifest(manifest.body), verified.url + ": "));
  verified.bytes = std::move(manifest.body);
  return verified;
}

Result<SelectedRelease> SelectRelease(const Manifest& manifest, std::string_view version,
                                      std::string_view arch, std::string_view package) {
  if (version.empty() || version == "latest") {
    const ManifestRelease* newest = nullptr;
    for (const ManifestRelease& release : manifest.releases) {
      if (release.version.find('-') != std::string::npos ||
          FindArchive(release, package, arch) == nullptr)
        continue;
      if (newest == nullptr || CompareVersions(release.version, newest->version) > 0)
        newest = &release;
    }
    if (newest == nullptr) {
      return NotFoundError("the manifest has no released " + std::string(package) + " for linux/" +
                           std::string(arch) + " (versions: " + JoinVersions(manifest) + ")")
          .WithReason("release_not_found");
    }
    return SelectedRelease{*newest, *FindArchive(*newest, package, arch)};
  }
  for (const ManifestRelease& release : manifest.releases) {
    if (CompareVersions(release.version, version) != 0)
      continue;
    const ManifestArchive* archive = FindArchive(release, package, arch);
    if (archive == nullptr) {
      std::string arches;
      for (const ManifestArchive& a : release.archives) {
        if (a.name == package)
          arches += (arches.empty() ? "" : ", ") + a.os + "/" + a.arch;
      }
      return NotFoundError("release " + release.version + " has no " + std::string(package) +
                           " for linux/" + std::string(arch) +
                           " (it has: " + (arches.empty() ? "none" : arches) + ")")
          .WithReason("arch_not_released");
    }
    return SelectedRelease{release, *archive};
  }
  return NotFoundError("release " + QuoteForMessage(version) + " is not in the manifest (" +
                       "versions: " + JoinVersions(manifest) + ")")
      .WithReason("release_not_found");
}

Result<CuptiSelection> SelectCuptiVariant(const std::vector<ManifestCupti>& variants,
                                          std::string_view arch,
                                          const std::optional<std::string>& driver_version,
                                          std::string_view pinned) {
  const ManifestCupti* pinned_variant = nullptr;
  if (!pinned.empty()) {
    for (const ManifestCupti& c : variants) {
      if (c.variant == pinned && c.arch == arch)
        pinned_variant = &c;
    }
    if (pinned_variant == nullptr) {
      return NotFoundError("CUPTI variant " + QuoteForMessage(pinned) + " is not released for " +
                           std::string(arch) + " (available: " + JoinVariants(variants, arch) + ")")
          .WithReason("cupti_variant_not_found");
    }
  }
  if (!driver_version.has_value() || driver_version->empty())
    return None("no NVIDIA driver found on this node");
  const std::string& driver = *driver_version;
  if (!IsValidDriverVersion(driver))
    return None("NVIDIA driver version " + QuoteForMessage(driver) + " is not understood");

  if (pinned_variant != nullptr) {
    if (CompareDriverVersions(driver, pinned_variant->min_driver) < 0) {
      return FailedPreconditionError("CUPTI variant " + pinned_variant->variant +
                                     " needs NVIDIA driver >= " + pinned_variant->min_driver +
                                     ", but this node has driver " + driver)
          .WithReason("cupti_variant_incompatible");
    }
    return CuptiSelection{*pinned_variant, pinned_variant->variant + " (pinned; driver " + driver +
                                               " >= " + pinned_variant->min_driver + ")"};
  }
  const ManifestCupti* best = nullptr;
  for (const ManifestCupti& c : variants) {
    if (c.arch != arch || CompareDriverVersions(driver, c.min_driver) < 0)
      continue;
    // The newest toolkit this driver runs: the highest minimum it satisfies; ties by name.
    if (best == nullptr || CompareDriverVersions(c.min_driver, best->min_driver) > 0 ||
        (CompareDriverVersions(c.min_driver, best->min_driver) == 0 && c.variant > best->variant))
      best = &c;
  }
  if (best == nullptr) {
    return None("NVIDIA driver " + driver + " is older than every CUPTI variant for " +
                std::string(arch) + " (" + JoinVariants(variants, arch) + ")");
  }
  return CuptiSelection{*best,
                        best->variant + " (driver " + driver + " >= " + best->min_driver + ")"};
}

Result<CuptiSelection> SelectCuptiVariant(const ManifestRelease& release, std::string_view arch,
                                          const std::optional<std::string>& driver_version,
                                          std::string_view pinned) {
  return SelectCuptiVariant(release.cupti, arch, driver_version, pinned);
}

Result<std::string> DownloadVerified(net::HttpClient& client, const ArchiveRef& ref,
                                     std::string_view public_key_pem,
                                     const std::string& dest_path) {
  if (ref.size > client.options().max_response_bytes) {
    return FailedPreconditionError(
        ref.url + " is " + std::to_string(ref.size) + " bytes, over the HTTP client's cap of " +
        std::to_string(client.options().max_response_bytes) + " (use ReleaseHttpClientOptions)");
  }
  EXPANSE_ASSIGN_OR_RETURN(Fetched archive, Get(client, ref.url));
  if (archive.status == 404)
    return NotFoundError(ref.url + " is missing on the mirror (HTTP 404)");
  if (archive.body.size() != ref.size) {
    return DataLossError(ref.url + " is " + std::to_string(archive.body.size()) +
                         " bytes; the signed manifest says " + std::to_string(ref.size))
        .WithReason("archive_size_mismatch");
  }
  const std::string sha256 = crypto::Sha256Hex(archive.body);
  if (sha256 != ref.sha256) {
    return DataLossError(ref.url + " has sha256 " + sha256 + "; the signed manifest says " +
                         ref.sha256)
        .WithReason("archive_checksum_mismatch");
  }
  EXPANSE_ASSIGN_OR_RETURN(Fetched signature, Get(client, ref.signature_url));
  if (signature.status == 404) {
    return FailedPreconditionError(ref.url + " has no signature (" + ref.signature_url +
                                   " is missing)")
        .WithReason("archive_unsigned");
  }
  if (signature.body.size() > kMaxSignatureBytes) {
    return InvalidArgumentError(ref.signature_url + " is too large to be a signature")
        .WithReason("signature_malformed");
  }
  EXPANSE_RETURN_IF_ERROR(
      Annotate(crypto::VerifyBlob(public_key_pem, archive.body, signature.body), ref.url + ": "));
  EXPANSE_RETURN_IF_ERROR(
      release_internal::ReplaceFile(dest_path + kSignatureSuffix, signature.body, 0644));
  EXPANSE_RETURN_IF_ERROR(release_internal::ReplaceFile(dest_path, archive.body, 0644));
  return dest_path;
}

Result<StagedBinary> InspectStagedBinary(const std::string& path, std::string_view public_key_pem,
                                         const std::string& verified_copy) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return fs::ErrnoStatus(errno, "inspect " + path);
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(path + " is not a regular file");

  StagedBinary staged;
  staged.path = path;
  if (path.ends_with(kArchiveSuffix)) {
    const std::string signature_path = path + kSignatureSuffix;
    Result<std::string> signature =
        release_internal::ReadStagedFile(signature_path, kMaxSignatureBytes);
    if (signature.status().code() == StatusCode::kNotFound) {
      return FailedPreconditionError(path + " has no signature beside it (" + signature_path +
                                     "); keep the .sig with a staged archive")
          .WithReason("archive_unsigned");
    }
    EXPANSE_RETURN_IF_ERROR(signature);
    EXPANSE_ASSIGN_OR_RETURN(std::string bytes,
                             release_internal::ReadStagedFile(path, kMaxArchiveBytes));
    EXPANSE_RETURN_IF_ERROR(
        Annotate(crypto::VerifyBlob(public_key_pem, bytes, *signature), path + ": "));
    if (!verified_copy.empty()) {
      EXPANSE_RETURN_IF_ERROR(release_internal::ReplaceFile(verified_copy, bytes, 0600));
      staged.path = verified_copy;
    }
    EXPANSE_ASSIGN_OR_RETURN(ReleaseInfo info, Annotate(InspectArchive(staged.path), path + ": "));
    staged.kind = StagedBinary::Kind::kArchive;
    staged.verified = true;
    staged.message = path + ": signature verified; " + info.name + " " + info.version + " for " +
                     info.os + "/" + info.arch + ", " + std::to_string(info.files.size()) +
                     " files checked against release.json";
    staged.info = std::move(info);
    return staged;
  }

  EXPANSE_ASSIGN_OR_RETURN(const bool elf, StartsWithElfMagic(path));
  if (!elf && (st.st_mode & 0111) == 0) {
    return InvalidArgumentError(path +
                                " is neither a release archive (*.tar.gz with its .sig) "
                                "nor an executable");
  }
  staged.kind = StagedBinary::Kind::kBareBinary;
  staged.verified = false;
  staged.message = path +
                   " is a bare binary: it carries no release signature, so it cannot be "
                   "verified; it is installed as given";
  return staged;
}

}  // namespace expanse::release
