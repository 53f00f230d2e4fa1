#include "release/manifest.h"

#include <limits>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "net/url_policy.h"
#include "release/json_fields.h"
#include "release/release_info.h"
#include "release/version_compare.h"

namespace expanse::release {

using nlohmann::json;
using release_internal::ElementPath;
using release_internal::MemberPath;

namespace {

constexpr size_t kMaxUrlBytes = 2048;

Status Invalid(const std::string& where, std::string_view value, std::string_view rule) {
  return InvalidArgumentError(where + " " + QuoteForMessage(value, 120) + " " + std::string(rule));
}

Status CheckRef(const ArchiveRef& ref, const std::string& where) {
  if (!IsAbsoluteHttpUrl(ref.url))
    return Invalid(MemberPath(where, "url"), ref.url, "is not an absolute http(s) URL");
  if (!IsAbsoluteHttpUrl(ref.signature_url)) {
    return Invalid(MemberPath(where, "signature_url"), ref.signature_url,
                   "is not an absolute http(s) URL");
  }
  if (!IsValidSha256Hex(ref.sha256))
    return Invalid(MemberPath(where, "sha256"), ref.sha256, "is not 64 lowercase hex digits");
  if (ref.size == 0 || ref.size > kMaxArchiveBytes) {
    return InvalidArgumentError(MemberPath(where, "size") + " must be from 1 to " +
                                std::to_string(kMaxArchiveBytes));
  }
  return OkStatus();
}

Status CheckRelease(const ManifestRelease& release, const std::string& where) {
  if (!IsValidVersion(release.version)) {
    return Invalid(MemberPath(where, "version"), release.version,
                   "is not a version such as 1.2.0 or 1.2.0-rc.1");
  }
  if (release.published_ms < 0)
    return InvalidArgumentError(MemberPath(where, "published_ms") + " must not be negative");
  std::set<std::tuple<std::string, std::string, std::string>> archives;
  for (size_t i = 0; i < release.archives.size(); ++i) {
    const ManifestArchive& a = release.archives[i];
    std::string at = ElementPath(where, "archives", i);
    if (!IsValidPackageName(a.name))
      return Invalid(MemberPath(at, "name"), a.name, "is not a package name");
    if (!IsValidPlatformWord(a.os))
      return Invalid(MemberPath(at, "os"), a.os, "is not an OS name such as linux");
    if (!IsValidPlatformWord(a.arch))
      return Invalid(MemberPath(at, "arch"), a.arch, "is not an architecture such as amd64");
    EXPANSE_RETURN_IF_ERROR(CheckRef(a.ref, at));
    if (!archives.emplace(a.name, a.os, a.arch).second) {
      return InvalidArgumentError(at + ": " + a.name + " for " + a.os + "/" + a.arch +
                                  " is listed twice in release " + release.version);
    }
  }
  std::set<std::pair<std::string, std::string>> variants;
  for (size_t i = 0; i < release.cupti.size(); ++i) {
    const ManifestCupti& c = release.cupti[i];
    std::string at = ElementPath(where, "cupti", i);
    if (!IsValidVariant(c.variant))
      return Invalid(MemberPath(at, "variant"), c.variant, "is not a variant such as cuda1300");
    if (!IsValidPlatformWord(c.arch))
      return Invalid(MemberPath(at, "arch"), c.arch, "is not an architecture such as amd64");
    if (!IsValidDriverVersion(c.min_driver)) {
      return Invalid(MemberPath(at, "min_driver"), c.min_driver,
                     "is not an NVIDIA driver version such as 580.65.06");
    }
    EXPANSE_RETURN_IF_ERROR(CheckRef(c.ref, at));
    if (!variants.emplace(c.variant, c.arch).second) {
      return InvalidArgumentError(at + ": CUPTI variant " + c.variant + " for " + c.arch +
                                  " is listed twice in release " + release.version);
    }
  }
  return OkStatus();
}

Result<ArchiveRef> ParseRef(const json& entry, const std::string& where) {
  using namespace release_internal;
  ArchiveRef ref;
  EXPANSE_ASSIGN_OR_RETURN(ref.url, RequiredString(entry, where, "url"));
  EXPANSE_ASSIGN_OR_RETURN(ref.sha256, RequiredString(entry, where, "sha256"));
  EXPANSE_ASSIGN_OR_RETURN(ref.size, RequiredUnsigned(entry, where, "size", kMaxArchiveBytes));
  EXPANSE_ASSIGN_OR_RETURN(ref.signature_url, RequiredString(entry, where, "signature_url"));
  return ref;
}

Result<const json*> ObjectElement(const json& array, const std::string& where, size_t i) {
  if (!array[i].is_object())
    return InvalidArgumentError(where + " must be an object");
  return &array[i];
}

Result<ManifestRelease> ParseRelease(const json& entry, const std::string& where) {
  using namespace release_internal;
  ManifestRelease release;
  EXPANSE_ASSIGN_OR_RETURN(release.version, RequiredString(entry, where, "version"));
  EXPANSE_ASSIGN_OR_RETURN(
      uint64_t published,
      RequiredUnsigned(entry, where, "published_ms", std::numeric_limits<int64_t>::max()));
  release.published_ms = static_cast<int64_t>(published);
  EXPANSE_ASSIGN_OR_RETURN(const json* archives, RequiredArray(entry, where, "archives"));
  for (size_t i = 0; i < archives->size(); ++i) {
    std::string at = ElementPath(where, "archives", i);
    EXPANSE_ASSIGN_OR_RETURN(const json* item, ObjectElement(*archives, at, i));
    ManifestArchive archive;
    EXPANSE_ASSIGN_OR_RETURN(archive.name, RequiredString(*item, at, "name"));
    EXPANSE_ASSIGN_OR_RETURN(archive.os, RequiredString(*item, at, "os"));
    EXPANSE_ASSIGN_OR_RETURN(archive.arch, RequiredString(*item, at, "arch"));
    EXPANSE_ASSIGN_OR_RETURN(archive.ref, ParseRef(*item, at));
    release.archives.push_back(std::move(archive));
  }
  EXPANSE_ASSIGN_OR_RETURN(const json* cupti, RequiredArray(entry, where, "cupti"));
  for (size_t i = 0; i < cupti->size(); ++i) {
    std::string at = ElementPath(where, "cupti", i);
    EXPANSE_ASSIGN_OR_RETURN(const json* item, ObjectElement(*cupti, at, i));
    ManifestCupti variant;
    EXPANSE_ASSIGN_OR_RETURN(variant.variant, RequiredString(*item, at, "variant"));
    EXPANSE_ASSIGN_OR_RETURN(variant.arch, RequiredString(*item, at, "arch"));
    EXPANSE_ASSIGN_OR_RETURN(variant.min_driver, RequiredString(*item, at, "min_driver"));
    EXPANSE_ASSIGN_OR_RETURN(variant.ref, ParseRef(*item, at));
    release.cupti.push_back(std::move(variant));
  }
  return release;
}

nlohmann::ordered_json RefJson(nlohmann::ordered_json object, const ArchiveRef& ref) {
  object["url"] = ref.url;
  object["sha256"] = ref.sha256;
  object["size"] = ref.size;
  object["signature_url"] = ref.signature_url;
  return object;
}

}  // namespace

bool IsAbsoluteHttpUrl(std::string_view url) {
  if (url.size() > kMaxUrlBytes || !(url.starts_with("https://") || url.starts_with("http://")))
    return false;
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) >= 0x7F)
      return false;
  }
  net::UrlParts parts;
  return net::SplitUrl(url, &parts).ok() && !parts.host.empty() &&
         (parts.scheme == "https" || parts.scheme == "http");
}

Status ValidateManifest(const Manifest& manifest) {
  // "1.2" and "1.2.0" are the same version, so duplicates are found by order, not by text.
  auto older = [](const std::string& a, const std::string& b) { return CompareVersions(a, b) < 0; };
  std::set<std::string, decltype(older)> versions(older);
  for (size_t i = 0; i < manifest.releases.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(CheckRelease(manifest.releases[i], ElementPath("", "releases", i)));
    if (!versions.insert(manifest.releases[i].version).second) {
      return InvalidArgumentError(ElementPath("", "releases", i) + ": version " +
                                  manifest.releases[i].version + " is listed twice");
    }
  }
  return OkStatus();
}

Result<Manifest> ParseManifest(std::string_view text) {
  using namespace release_internal;
  if (text.size() > kMaxManifestBytes) {
    return InvalidArgumentError("manifest.json is larger than " +
                                std::to_string(kMaxManifestBytes) + " bytes");
  }
  EXPANSE_ASSIGN_OR_RETURN(json document, ParseJsonObject(text, "manifest.json"));
  EXPANSE_RETURN_IF_ERROR(CheckFormat(document, "manifest.json", kManifestFormat));
  EXPANSE_ASSIGN_OR_RETURN(const json* releases, RequiredArray(document, "", "releases"));
  Manifest manifest;
  for (size_t i = 0; i < releases->size(); ++i) {
    std::string at = ElementPath("", "releases", i);
    EXPANSE_ASSIGN_OR_RETURN(const json* item, ObjectElement(*releases, at, i));
    EXPANSE_ASSIGN_OR_RETURN(ManifestRelease release, ParseRelease(*item, at));
    manifest.releases.push_back(std::move(release));
  }
  EXPANSE_RETURN_IF_ERROR(ValidateManifest(manifest));
  return manifest;
}

std::string RenderManifest(const Manifest& manifest) {
  using ojson = nlohmann::ordered_json;
  ojson document;
  document["format"] = kManifestFormat;
  document["releases"] = ojson::array();
  for (const ManifestRelease& release : manifest.releases) {
    ojson entry;
    entry["version"] = release.version;
    entry["published_ms"] = release.published_ms;
    entry["archives"] = ojson::array();
    for (const ManifestArchive& a : release.archives) {
      ojson item;
      item["name"] = a.name;
      item["os"] = a.os;
      item["arch"] = a.arch;
      entry["archives"].push_back(RefJson(std::move(item), a.ref));
    }
    entry["cupti"] = ojson::array();
    for (const ManifestCupti& c : release.cupti) {
      ojson item;
      item["variant"] = c.variant;
      item["arch"] = c.arch;
      item["min_driver"] = c.min_driver;
      entry["cupti"].push_back(RefJson(std::move(item), c.ref));
    }
    document["releases"].push_back(std::move(entry));
  }
  return document.dump(2) + "\n";
}

}  // namespace expanse::release
