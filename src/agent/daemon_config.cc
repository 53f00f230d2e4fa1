#include "agent/daemon_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace expanse::agent {
namespace {

constexpr size_t kMaxConfigBytes = 64 * 1024;

Status FieldError(const std::string& field, const std::string& problem) {
  return InvalidArgumentError("config." + field + ": " + problem).WithReason("invalid_config");
}

Result<std::string> RequiredString(const nlohmann::json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end() || !it->is_string() || it->get<std::string>().empty()) {
    return FieldError(field, "required text is missing");
  }
  return it->get<std::string>();
}

Status CheckUrl(const std::string& field, const std::string& url) {
  if (!url.starts_with("https://") && !url.starts_with("http://")) {
    return FieldError(field, "expected an http(s) URL, got \"" + url + "\"");
  }
  return OkStatus();
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
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgumentError("config: not a JSON object").WithReason("invalid_config");
  }
  if (doc.value("version", 0) != 1)
    return FieldError("version", "must be 1");
  DaemonConfig config;
  EXPANSE_ASSIGN_OR_RETURN(config.compute_id, RequiredString(doc, "compute_id"));
  EXPANSE_ASSIGN_OR_RETURN(config.credential, RequiredString(doc, "credential"));
  if (!config.credential.starts_with("exp_cc_")) {
    // The message must not echo the value: it may be a secret pasted into the wrong field.
    return FieldError("credential", "not a compute credential (expected the exp_cc_ prefix)");
  }
  EXPANSE_ASSIGN_OR_RETURN(config.control_plane_url, RequiredString(doc, "control_plane_url"));
  EXPANSE_ASSIGN_OR_RETURN(config.data_plane_url, RequiredString(doc, "data_plane_url"));
  EXPANSE_RETURN_IF_ERROR(CheckUrl("control_plane_url", config.control_plane_url));
  EXPANSE_RETURN_IF_ERROR(CheckUrl("data_plane_url", config.data_plane_url));
  config.organization = doc.value("organization", std::string());
  config.credential_id = doc.value("credential_id", std::string());
  config.shared_prefix = doc.value("shared_prefix", std::string());
  if (!config.shared_prefix.empty() && config.shared_prefix.front() != '/') {
    return FieldError("shared_prefix", "must be an absolute path");
  }
  config.daemon_user = doc.value("daemon_user", config.daemon_user);
  config.written_ms = doc.value("written_ms", int64_t{0});
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
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return NotFoundError("cannot read daemon config " + path + ": " + std::strerror(errno))
        .WithReason("config_missing");
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError("daemon config " + path + " is not a regular file")
        .WithReason("config_permissions");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPreconditionError("daemon config " + path + " has mode " + mode +
                                   "; it holds the compute credential and must be 0600")
        .WithReason("config_permissions");
  }
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text,
                           fs::ReadSmallFile(path, kMaxConfigBytes));
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

Status SaveDaemonConfig(const std::string& path, const DaemonConfig& config, uid_t uid, gid_t gid) {
  if (PathIsUnder(path, config.shared_prefix)) {
    return FailedPreconditionError("refusing to write the credential config " + path +
                                   " on the shared mount " + config.shared_prefix)
        .WithReason("config_on_shared_mount");
  }
  const std::filesystem::path p(path);
  return fs::WriteFileAtomically(p.parent_path().string(), p.filename().string(),
                                 RenderDaemonConfig(config), 0600, uid, gid);
}

}  // namespace expanse::agent
