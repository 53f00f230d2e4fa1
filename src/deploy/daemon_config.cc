#include "deploy/daemon_config.h"

#include <cstdio>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/path_rules.h"
#include "deploy/plane_url.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::deploy {
namespace {

constexpr size_t kMaxConfigBytes = 64 * 1024;

Status FieldError(const std::string& field, const std::string& problem) {
  return InvalidArgumentError("config." + field + " " + problem).WithReason("invalid_config");
}

// What a config holds the daemon can trust: strings, like every outside JSON, are read by
// wire::FieldReader and never by nlohmann's throwing accessors.
constexpr size_t kMaxIdBytes = 128;
constexpr size_t kMaxCredentialBytes = 512;
constexpr size_t kMaxUrlFieldBytes = 4096;  // CheckPlaneUrl applies the real limit
constexpr size_t kMaxPathBytes = 4096;      // CheckAbsolutePath applies the real limit
constexpr size_t kMaxUserBytes = 64;

Status WithConfigReason(Status status) {
  return status.ok() ? status : std::move(status).WithReason("invalid_config");
}

}  // namespace

bool PathIsUnder(std::string_view path, std::string_view prefix) {
  if (prefix.empty())
    return false;
  const std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  const std::filesystem::path root = std::filesystem::path(prefix).lexically_normal();
  auto pi = p.begin();
  for (auto ri = root.begin(); ri != root.end(); ++ri, ++pi) {
    if (ri->empty())
      continue;  // a trailing slash
    if (pi == p.end() || *pi != *ri)
      return false;
  }
  return true;
}

Result<DaemonConfig> ParseDaemonConfig(std::string_view text) {
  Result<nlohmann::json> doc = wire::ParseJson(text, wire::JsonLimits{.max_depth = 4});
  if (!doc.ok())
    return InvalidArgumentError("config: " + doc.status().message()).WithReason("invalid_config");
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader r,
                           wire::FieldReader::Object(*doc, "config", "invalid_config"));
  EXPANSE_RETURN_IF_ERROR(WithConfigReason(r.Expect("version", 1)));
  DaemonConfig config;
  EXPANSE_ASSIGN_OR_RETURN(config.compute_id,
                           r.Text("compute_id", kMaxIdBytes, wire::Need::kRequired));
  // No refusal may echo the value, which may be a secret pasted into the wrong field:
  // FieldReader's messages name only the field, and so does the prefix check.
  EXPANSE_ASSIGN_OR_RETURN(config.credential,
                           r.Text("credential", kMaxCredentialBytes, wire::Need::kRequired));
  if (!config.credential.starts_with("exp_cc_"))
    return FieldError("credential", "is not a compute credential (expected the exp_cc_ prefix)");
  EXPANSE_ASSIGN_OR_RETURN(config.control_plane_url,
                           r.Text("control_plane_url", kMaxUrlFieldBytes, wire::Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(config.data_plane_url,
                           r.Text("data_plane_url", kMaxUrlFieldBytes, wire::Need::kRequired));
  EXPANSE_RETURN_IF_ERROR(
      WithConfigReason(CheckPlaneUrl("config.control_plane_url", config.control_plane_url)));
  EXPANSE_RETURN_IF_ERROR(
      WithConfigReason(CheckPlaneUrl("config.data_plane_url", config.data_plane_url)));
  EXPANSE_ASSIGN_OR_RETURN(config.organization,
                           r.Text("organization", kMaxIdBytes, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(config.credential_id,
                           r.Text("credential_id", kMaxIdBytes, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(config.shared_prefix,
                           r.Text("shared_prefix", kMaxPathBytes, wire::Need::kOptional));
  if (!config.shared_prefix.empty()) {
    EXPANSE_RETURN_IF_ERROR(
        WithConfigReason(CheckAbsolutePath("config.shared_prefix", config.shared_prefix)));
  }
  EXPANSE_ASSIGN_OR_RETURN(std::string user,
                           r.Text("daemon_user", kMaxUserBytes, wire::Need::kOptional));
  if (!user.empty())
    config.daemon_user = std::move(user);
  EXPANSE_ASSIGN_OR_RETURN(config.written_ms,
                           r.Int("written_ms", 0, wire::kMaxTimeMs, wire::Need::kOptional));
  return config;
}

std::string RenderDaemonConfig(const DaemonConfig& config) {
  const nlohmann::json doc = {{"version", 1},
                              {"compute_id", config.compute_id},
                              {"organization", config.organization},
                              {"credential_id", config.credential_id},
                              {"credential", config.credential},
                              {"control_plane_url", config.control_plane_url},
                              {"data_plane_url", config.data_plane_url},
                              {"shared_prefix", config.shared_prefix},
                              {"daemon_user", config.daemon_user},
                              {"written_ms", config.written_ms}};
  return doc.dump(2) + "\n";
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  return LoadDaemonConfig(RealHost::Get(), path);
}

Result<DaemonConfig> LoadDaemonConfig(Host& host, const std::string& path) {
  const std::optional<FileInfo> st = host.LinkStat(path);
  if (!st) {
    return NotFoundError("cannot read daemon config " + path + ": No such file or directory")
        .WithReason("config_missing");
  }
  if (st->type != FileInfo::Type::kFile) {
    return FailedPreconditionError("daemon config " + path + " is not a regular file")
        .WithReason("config_permissions");
  }
  if ((st->mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st->mode & 07777));
    return FailedPreconditionError("daemon config " + path + " has mode " + mode +
                                   "; it holds the compute credential and must be 0600")
        .WithReason("config_permissions");
  }
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text, host.ReadFile(path, kMaxConfigBytes));
  if (!text)
    return NotFoundError("daemon config " + path + " vanished").WithReason("config_missing");
  Result<DaemonConfig> config = ParseDaemonConfig(*text);
  if (!config.ok()) {
    return Status(config.status().code(), path + ": " + config.status().message())
        .WithReason(config.status().reason());
  }
  if (PathIsUnder(path, config->shared_prefix)) {
    return FailedPreconditionError("daemon config " + path + " lies on the shared mount " +
                                   config->shared_prefix + "; keep the credential on local disk")
        .WithReason("config_on_shared_mount");
  }
  return config;
}

Status SaveDaemonConfig(Host& host, const std::string& path, const DaemonConfig& config, uid_t uid,
                        gid_t gid) {
  if (PathIsUnder(path, config.shared_prefix)) {
    return FailedPreconditionError("refusing to write the credential config " + path +
                                   " on the shared mount " + config.shared_prefix)
        .WithReason("config_on_shared_mount");
  }
  return host.WriteFile(path, RenderDaemonConfig(config), 0600, uid, gid);
}

}  // namespace expanse::deploy
