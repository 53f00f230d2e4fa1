#include "install/install_options.h"

#include <regex>

#include "core/version_compare.h"
#include "deploy/daemon_config.h"
#include "install/systemd_unit.h"

namespace expanse::install {
namespace {

bool IsAbsolutePath(const std::string& p) { return !p.empty() && p.front() == '/'; }

bool HasControlCharacter(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f)
      return true;
  }
  return false;
}

void CheckPath(const std::string& flag, const std::string& value, std::vector<std::string>& out) {
  if (value.empty())
    return;
  if (!IsAbsolutePath(value))
    out.push_back(flag + " must be an absolute path, got '" + value + "'");
  else if (HasControlCharacter(value))
    out.push_back(flag + " contains a control character");
  else if (value.find("/../") != std::string::npos || value.ends_with("/.."))
    out.push_back(flag + " must not contain '..': '" + value + "'");
}

void CheckTypeAndRole(const std::string& type, const std::string& role,
                      std::vector<std::string>& out) {
  if (!type.empty() && type != "slurm")
    out.push_back("--type '" + type + "' is not supported; use --type slurm");
  if (role != "controller" && role != "sampler")
    out.push_back("--role '" + role + "' is unknown; use controller or sampler");
}

// The rule the unit's User= line is rendered with, checked here before anything changes: a
// name only the renderer refused used to be found after the install token was spent.
void CheckUser(const std::string& user, std::vector<std::string>& out) {
  if (Status valid = CheckUserName("--user", user); !valid.ok())
    out.push_back(valid.message());
}

void CheckUrl(const std::string& flag, const std::string& url, std::vector<std::string>& out) {
  if (url.empty())
    return;
  if (!url.starts_with("https://") && !url.starts_with("http://"))
    out.push_back(flag + " must be an https:// URL, got '" + url + "'");
  else if (HasControlCharacter(url) || url.find(' ') != std::string::npos)
    out.push_back(flag + " contains spaces or control characters");
}

}  // namespace

std::vector<std::string> CheckInstallFlags(const InstallOptions& o) {
  std::vector<std::string> out;
  CheckTypeAndRole(o.type, o.role, out);
  CheckUser(o.user, out);
  CheckPath("--shared-prefix", o.shared_prefix, out);
  CheckPath("--config", o.config_path, out);
  CheckPath("--slurm-conf", o.slurm_conf, out);
  CheckPath("--cosign-key", o.cosign_key, out);
  CheckPath("--daemon-binary", o.daemon_binary, out);
  CheckUrl("--control-plane", o.control_plane, out);
  CheckUrl("--data-plane", o.data_plane, out);
  CheckUrl("--releases-url", o.releases_url, out);
  if (!o.daemon_version.empty() && !o.daemon_binary.empty())
    out.push_back("--daemon-version and --daemon-binary are mutually exclusive; give one");
  if (!o.daemon_version.empty() && !CanonicalVersion(o.daemon_version)) {
    out.push_back("--daemon-version '" + o.daemon_version +
                  "' is not a version such as 1.4.2, v1.4.2 or 1.5.0-rc.1");
  }
  if (o.sampler_bootstrap != "prolog" && o.sampler_bootstrap != "off")
    out.push_back("--sampler-bootstrap '" + o.sampler_bootstrap +
                  "' is unknown; use prolog or off");
  if (o.cupti_mode != "perfmon" && o.cupti_mode != "sysadmin" && o.cupti_mode != "none")
    out.push_back("--cupti-mode '" + o.cupti_mode + "' is unknown; use perfmon, sysadmin or none");
  static const std::regex kVariant("[a-z0-9_]{1,32}");
  if (!o.cupti_variant.empty() && !std::regex_match(o.cupti_variant, kVariant))
    out.push_back("--cupti-variant '" + o.cupti_variant +
                  "' is not a variant name (e.g. cuda1300)");
  if (o.heartbeat_timeout.count() <= 0)
    out.push_back("--heartbeat-timeout must be positive");
  if (!o.config_path.empty() && !o.shared_prefix.empty() &&
      deploy::PathIsUnder(o.config_path, o.shared_prefix)) {
    out.push_back("--config " + o.config_path + " is on the shared mount " + o.shared_prefix +
                  "; the credential must stay on the controller's local disk");
  }
  if (o.role == "sampler") {
    if (o.shared_prefix.empty())
      out.push_back("--role sampler needs --shared-prefix (the daemon binary comes from there)");
    if (o.write_config_only || o.type.empty())
      out.push_back(
          "--role sampler installs a worker service: it needs --type slurm and "
          "cannot be combined with --write-config-only (a sampler has no credential)");
  }
  return out;
}

std::vector<std::string> CheckUninstallFlags(const UninstallOptions& o) {
  std::vector<std::string> out;
  CheckTypeAndRole(o.type.empty() ? "slurm" : o.type, o.role, out);
  if (!o.user.empty())
    CheckUser(o.user, out);
  CheckPath("--shared-prefix", o.shared_prefix, out);
  CheckPath("--config", o.config_path, out);
  CheckPath("--slurm-conf", o.slurm_conf, out);
  return out;
}

std::string EffectiveConfigPath(const std::string& flag) {
  return flag.empty() ? std::string(deploy::kDefaultDaemonConfigPath) : flag;
}

}  // namespace expanse::install
