// What `expanse compute install` and `uninstall` were asked to do: one struct per command, filled
// by the CLI from its flags (defaults as the operator guide's flag reference lists them), and the
// checks that need no host access. Contradictions are found here, before anything changes.

#ifndef EXPANSE_INSTALL_INSTALL_OPTIONS_H_
#define EXPANSE_INSTALL_INSTALL_OPTIONS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/host.h"
#include "core/status.h"
#include "deploy/daemon_config.h"

namespace expanse::install {

inline constexpr char kDefaultReleasesUrl[] = "https://releases.expanse.sh";

// The machine an install changes, and its node-local and system paths. Real installs use the
// defaults; nothing but tests changes them (a MemoryHost, paths under a temporary root).
// Test hooks (documented in docs/testing.md; the CLI reads them from the environment): fail,
// or die with SIGKILL, once the install journal has made this many changes. Every change is
// a rollback point, so a test that fails after 0, 1, 2, ... changes tries them all.
struct FaultInjection {
  std::optional<int> fail_after_changes{};
  std::optional<int> kill_after_changes{};
};

struct HostPaths {
  // Every file, command, environment and account access of the migrated steps goes through it
  // (core/host.h). Not owned.
  Host* host = &RealHost::Get();
  // Root's own: install state, journal, staging and the lock. Kept apart from the daemon's
  // state directory, which the daemon account owns and so must not be able to edit a journal
  // that root replays.
  std::string state_dir = deploy::kDefaultInstallStateDir;
  std::string lock_path = "/var/lib/expanse-install/install.lock";
  std::string unit_dir = "/etc/systemd/system";
  std::string systemd_runtime_dir = "/run/systemd/system";  // exists when systemd is PID 1
  std::string daemon_env = "/etc/expanse/daemon.env";
  std::string daemon_state_dir = "/var/lib/expanse";  // the daemon's own node-local state
  // Two things are always on this machine's own disk, whatever `host` is: the install lock (a
  // lock between processes) and the scratch directory where releases are downloaded, verified
  // and unpacked before the install copies from them ("" = state_dir).
  std::string staging_dir;
  FaultInjection faults;
};

struct InstallOptions {
  std::string type;  // "" = write the credential config only; "slurm" = install
  std::string role = "controller";
  std::string shared_prefix;
  std::string daemon_version;
  std::string daemon_binary;
  std::string control_plane;
  std::string data_plane;
  std::string config_path;  // "" = derived (/var/lib/slurm/.expanse/config.json)
  std::string user = "slurm";
  std::string slurm_conf;
  bool patch_slurm_conf = false;
  bool reconfigure = true;
  bool systemd = true;
  std::chrono::milliseconds heartbeat_timeout{std::chrono::minutes(1)};
  std::string sampler_bootstrap = "prolog";
  std::string cupti_variant;  // "" = automatic
  std::string cupti_mode = "perfmon";
  bool profiling_agent = true;
  bool bundled_pyspy = true;
  std::string releases_url = kDefaultReleasesUrl;
  std::string cosign_key;  // "" = the embedded key
  bool reinstall = false;  // also --force
  bool write_config_only = false;
  bool verbose = false;
  bool allow_downgrade = false;
  std::string hostname;  // "" = this host's name
};

struct UninstallOptions {
  std::string type;
  std::string role = "controller";
  // Checked against the install state, which says what is removed: a different value is
  // refused (reason "flag_mismatch"), "" takes the state's.
  std::string shared_prefix;
  std::string slurm_conf;
  std::string user;
  std::string config_path;
  bool keep_identity = false;
  bool reconfigure = true;
  bool verbose = false;
  std::string hostname;
};

// Every problem with the flags themselves, each a full sentence; empty when they are usable.
std::vector<std::string> CheckInstallFlags(const InstallOptions& options);
std::vector<std::string> CheckUninstallFlags(const UninstallOptions& options);

// True when only the credential config is to be written (--write-config-only, or no --type).
inline bool ConfigOnly(const InstallOptions& o) { return o.write_config_only || o.type.empty(); }

// The credential path in effect: --config, else the default.
std::string EffectiveConfigPath(const std::string& flag);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALL_OPTIONS_H_
