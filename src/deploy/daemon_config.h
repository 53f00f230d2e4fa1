// The controller's credential config (docs/formats/daemon-config.md): which compute this
// controller is, its credential and the plane URLs. Written by `expanse compute install` after
// the token exchange, read by the daemon at start (path from EXPANSE_DAEMON_CONFIG, default
// /var/lib/slurm/.expanse/config.json).
//
// It holds a secret, so both sides are strict: the file must be a regular file owned by the
// daemon user, readable by nobody else (0600 or tighter), and never on the shared mount.
#ifndef EXPANSE_DEPLOY_DAEMON_CONFIG_H_
#define EXPANSE_DEPLOY_DAEMON_CONFIG_H_

#include <sys/types.h>

#include <string>

#include "core/host.h"
#include "core/result.h"

namespace expanse::deploy {

inline constexpr char kDefaultDaemonConfigPath[] = "/var/lib/slurm/.expanse/config.json";
// Where `expanse compute install` records what it installed, one <role>.json per role
// (install/install_state.h). A controller's record there also tells the Prolog's sampler
// bootstrap that this node's GPUs are sampled by the controller daemon.
inline constexpr char kDefaultInstallStateDir[] = "/var/lib/expanse-install";

struct DaemonConfig {
  std::string compute_id;
  std::string organization;
  std::string credential_id;
  std::string credential;  // exp_cc_…; never logged
  std::string control_plane_url;
  std::string data_plane_url;
  std::string shared_prefix;  // "" when the cluster has none (controller-only sampling)
  std::string daemon_user = "slurm";
  int64_t written_ms = 0;
};

// Parses and checks the document. Errors name the field: `config.control_plane_url: ...`.
Result<DaemonConfig> ParseDaemonConfig(std::string_view text);
std::string RenderDaemonConfig(const DaemonConfig& config);

// Reads `path`, refusing a file that is not regular, is readable or writable by group or
// others (reason "config_permissions"), or lies under `shared_prefix` (reason
// "config_on_shared_mount").
// Read through `host` (core/host.h); the one-argument form reads this machine.
Result<DaemonConfig> LoadDaemonConfig(Host& host, const std::string& path);
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

// Writes atomically with mode 0600 and the given owner; refuses a path under the config's
// shared prefix.
Status SaveDaemonConfig(Host& host, const std::string& path, const DaemonConfig& config, uid_t uid,
                        gid_t gid);

// True when `path` is `prefix` or below it (both absolute, compared by components).
bool PathIsUnder(std::string_view path, std::string_view prefix);

}  // namespace expanse::deploy

#endif  // EXPANSE_DEPLOY_DAEMON_CONFIG_H_
