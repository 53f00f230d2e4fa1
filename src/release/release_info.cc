#include "release/release_info.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "core/version_compare.h"
#include "release/status_util.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::release {

using nlohmann::json;
using release_internal::ElementPath;
using release_internal::MemberPath;

namespace {

constexpr uint64_t kMaxFileSize = uint64_t{1} << 40;  // far above any real release file

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool AllOf(std::string_view text, size_t max, bool (*allowed)(char)) {
  return !text.empty() && text.size() <= max && std::all_of(text.begin(), text.end(), allowed);
}

std::string ModeText(uint32_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", mode);
  return text;
}

Result<uint32_t> ParseMode(std::string_view text, const std::string& where) {
  if (text == "0755")
    return kExecutableMode;
  if (text == "0644")
    return kRegularMode;
  return InvalidArgumentError(where + " must be \"0755\" or \"0644\", not " +
                              QuoteForMessage(text));
}

Status Invalid(const std::string& where, std::string_view value, std::string_view rule) {
  return InvalidArgumentError(where + " " + QuoteForMessage(value) +
                              " is not valid: " + std::string(rule));
}

}  // namespace

bool IsValidPackageName(std::string_view name) {
  return AllOf(name, 64, [](char c) { return IsLowerAlnum(c) || c == '-'; }) && name[0] >= 'a' &&
         name[0] <= 'z';
}

bool IsValidPlatformWord(std::string_view word) {
  return AllOf(word, 16, [](char c) { return IsLowerAlnum(c) || c == '_'; });
}

bool IsValidVariant(std::string_view variant) {
  return AllOf(variant, 32, [](char c) { return IsLowerAlnum(c) || c == '_'; });
}

bool IsValidSha256Hex(std::string_view hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool IsValidArchivePath(std::string_view path) {
  if (path.empty() || path.size() > 1024)
    return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos)
      end = path.size();
    std::string_view component = path.substr(start, end - start);
    if (component.empty() || component.size() > 255 || component == "." || component == "..")
      return false;
    for (char c : component) {
      if (c <= ' ' || c >= 0x7F || c == '\\')
        return false;
    }
    start = end + 1;
  }
  return true;
}

std::string ArchiveFileName(const ReleaseInfo& info) {
  std::string name = info.name + "_" + info.version;
  if (!info.variant.empty())
    name += "_" + info.variant;
  return name + "_" + info.os + "_" + info.arch + kArchiveSuffix;
}

Status ValidateReleaseInfo(const ReleaseInfo& info) {
  if (!IsValidPackageName(info.name))
    return Invalid("name", info.name, "use 1 to 64 of a-z 0-9 - starting with a letter");
  if (!IsValidVersion(info.version))
    return Invalid("version", info.version, "use dotted numbers such as 1.2.0 or 1.2.0-rc.1");
  if (!IsValidPlatformWord(info.os))
    return Invalid("os", info.os, "use 1 to 16 of a-z 0-9 _");
  if (!IsValidPlatformWord(info.arch))
    return Invalid("arch", info.arch, "use 1 to 16 of a-z 0-9 _ such as amd64");
  if (info.variant.empty() != info.min_driver.empty()) {
    return InvalidArgumentError(
        "variant and min_driver go together: a CUPTI build names both, other packages neither");
  }
  if (!info.variant.empty()) {
    if (!IsValidVariant(info.variant))
      return Invalid("variant", info.variant, "use 1 to 32 of a-z 0-9 _ such as cuda1300");
    if (!IsValidDriverVersion(info.min_driver))
      return Invalid("min_driver", info.min_driver, "use an NVIDIA driver version like 580.65.06");
  }
  for (size_t i = 0; i < info.files.size(); ++i) {
    const ReleaseFile& file = info.files[i];
    std::string where = ElementPath("", "files", i);
    if (!IsValidArchivePath(file.path))
      return Invalid(where + ".path", file.path, "use a relative path without . or ..");
    if (file.path == kReleaseInfoName)
      return InvalidArgumentError(where + ".path: release.json does not list itself");
    if (!IsValidSha256Hex(file.sha256))
      return Invalid(where + ".sha256", file.sha256, "use 64 lowercase hex digits");
    if (file.size > kMaxFileSize)
      return InvalidArgumentError(where + ".size is too large");
    if (file.mode != kExecutableMode && file.mode != kRegularMode)
      return InvalidArgumentError(where + ".mode must be 0755 or 0644");
    if (i > 0 && info.files[i - 1].path >= file.path) {
      return InvalidArgumentError(where + ".path " + QuoteForMessage(file.path) +
                                  (info.files[i - 1].path == file.path
                                       ? " is listed twice"
                                       : " is out of order: files are sorted by path"));
    }
  }
  return OkStatus();
}

namespace {

// Bounds for reading; ValidateReleaseInfo applies the real rules.
constexpr size_t kMaxTextBytes = 4096;
constexpr size_t kMaxFiles = 100'000;
constexpr wire::Need kRequired = wire::Need::kRequired;

Result<ReleaseInfo> ParseReleaseInfoDocument(std::string_view text) {
  // release.json nests three deep (files[i]); eight leaves room for new members.
  EXPANSE_ASSIGN_OR_RETURN(json document, wire::ParseJson(text, wire::JsonLimits{.max_depth = 8}));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader root,
                           wire::FieldReader::Object(document, "", "invalid_release_info"));
  EXPANSE_RETURN_IF_ERROR(root.Expect("format", kReleaseInfoFormat));
  ReleaseInfo info;
  EXPANSE_ASSIGN_OR_RETURN(info.name, root.Text("name", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(info.version, root.Text("version", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(info.os, root.Text("os", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(info.arch, root.Text("arch", kMaxTextBytes, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(info.variant,
                           root.Text("variant", kMaxTextBytes, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(info.min_driver,
                           root.Text("min_driver", kMaxTextBytes, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<wire::FieldReader> files,
                           root.Objects("files", kMaxFiles, kRequired));
  for (size_t i = 0; i < files.size(); ++i) {
    const wire::FieldReader& entry = files[i];
    ReleaseFile file;
    EXPANSE_ASSIGN_OR_RETURN(file.path, entry.Text("path", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(file.sha256, entry.Text("sha256", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(file.size, entry.Uint("size", kMaxFileSize, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(std::string mode, entry.Text("mode", kMaxTextBytes, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(file.mode, ParseMode(mode, entry.PathOf("mode")));
    info.files.push_back(std::move(file));
  }
  return info;
}

}  // namespace

Result<ReleaseInfo> ParseReleaseInfo(std::string_view text) {
  if (text.size() > kMaxReleaseInfoBytes) {
    return InvalidArgumentError("release.json is larger than " +
                                std::to_string(kMaxReleaseInfoBytes) + " bytes");
  }
  EXPANSE_ASSIGN_OR_RETURN(ReleaseInfo info, release_internal::Annotate(
                                                 ParseReleaseInfoDocument(text), "release.json: "));
  EXPANSE_RETURN_IF_ERROR(ValidateReleaseInfo(info));
  return info;
}

std::string RenderReleaseInfo(const ReleaseInfo& info) {
  // ordered_json keeps members in insertion order, so the bytes are the same on every build.
  nlohmann::ordered_json document;
  document["format"] = kReleaseInfoFormat;
  document["name"] = info.name;
  document["version"] = info.version;
  document["os"] = info.os;
  document["arch"] = info.arch;
  if (!info.variant.empty()) {
    document["variant"] = info.variant;
    document["min_driver"] = info.min_driver;
  }
  document["files"] = nlohmann::ordered_json::array();
  for (const ReleaseFile& file : info.files) {
    document["files"].push_back({{"path", file.path},
                                 {"sha256", file.sha256},
                                 {"size", file.size},
                                 {"mode", ModeText(file.mode)}});
  }
  return document.dump(2) + "\n";
}

}  // namespace expanse::release
