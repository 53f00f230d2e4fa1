#include "release/manifest.h"

#include <limits>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "core/version_compare.h"
#include "net/url_policy.h"
#include "release/release_info.h"
#include "release/status_util.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

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

// Bounds for reading; the checks of the parsed manifest (CheckRelease) apply the real rules.
constexpr size_t kMaxTextBytes = 4096;
constexpr size_t kMaxEntries = 100'000;
constexpr wire::Need kRequired = wire::Need::kRequired;

Result<ArchiveRef> ParseRef(const wire::FieldReader& entry) {
  ArchiveRef ref;
  EXPANSE_ASSIGN_OR_RETURN(ref.url, entry.Text("url", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(ref.sha256, entry.Text("sha256", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(ref.size, entry.Uint("size", kMaxArchiveBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(ref.signature_url,
                           entry.Text("signature_url", kMaxTextBytes, kRequired));
  return ref;
}

Result<ManifestRelease> ParseRelease(const wire::FieldReader& entry) {
  ManifestRelease release;
  EXPANSE_ASSIGN_OR_RETURN(release.version, entry.Text("version", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      release.published_ms,
      entry.Int("published_ms", 0, std::numeric_limits<int64_t>::max(), kRequired));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<wire::FieldReader> archives,
                           entry.Objects("archives", kMaxEntries, kRequired));
  for (const wire::FieldReader& item : archives) {
    ManifestArchive archive;
    EXPANSE_ASSIGN_OR_RETURN(archive.name, item.Text("name", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(archive.os, item.Text("os", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(archive.arch, item.Text("arch", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(archive.ref, ParseRef(item));
    release.archives.push_back(std::move(archive));
  }
  EXPANSE_ASSIGN_OR_RETURN(std::vector<wire::FieldReader> cupti,
                           entry.Objects("cupti", kMaxEntries, kRequired));
  for (const wire::FieldReader& item : cupti) {
    ManifestCupti variant;
    EXPANSE_ASSIGN_OR_RETURN(variant.variant, item.Text("variant", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(variant.arch, item.Text("arch", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(variant.min_driver, item.Text("min_driver", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(variant.ref, ParseRef(item));
    release.cupti.push_back(std::move(variant));
  }
  return release;
}

Result<Manifest> ParseManifestDocument(std::string_view text) {
  // A manifest nests five deep (releases[i].archives[j]); eight leaves room for new members.
  EXPANSE_ASSIGN_OR_RETURN(json document, wire::ParseJson(text, wire::JsonLimits{.max_depth = 8}));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader root,
                           wire::FieldReader::Object(document, "", "invalid_manifest"));
  EXPANSE_RETURN_IF_ERROR(root.Expect("format", kManifestFormat));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<wire::FieldReader> releases,
                           root.Objects("releases", kMaxEntries, kRequired));
  Manifest manifest;
  for (const wire::FieldReader& item : releases) {
    EXPANSE_ASSIGN_OR_RETURN(ManifestRelease release, ParseRelease(item));
    manifest.releases.push_back(std::move(release));
  }
  return manifest;
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
  if (text.size() > kMaxManifestBytes) {
    return InvalidArgumentError("manifest.json is larger than " +
                                std::to_string(kMaxManifestBytes) + " bytes");
  }
  EXPANSE_ASSIGN_OR_RETURN(Manifest manifest, release_internal::Annotate(
                                                  ParseManifestDocument(text), "manifest.json: "));
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
