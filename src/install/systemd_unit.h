// The systemd units `expanse compute install --type slurm` writes: expanse-daemon.service on
// the controller and expanse-sampler.service on workers. Rendering is a pure function of
// UnitOptions, so the installer, `--systemd=false` (print the unit) and tests share it. What a
// rendered unit contains, and why, is in docs/formats/systemd-units.md.

#ifndef EXPANSE_INSTALL_SYSTEMD_UNIT_H_
#define EXPANSE_INSTALL_SYSTEMD_UNIT_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::install {

// Bumped when a managed unit changes in a way reinstall or uninstall must tell apart.
inline constexpr int kUnitFormatVersion = 1;
inline constexpr char kDaemonEnvPath[] = "/etc/expanse/daemon.env";
inline constexpr char kControllerUnitName[] = "expanse-daemon.service";
inline constexpr char kSamplerUnitName[] = "expanse-sampler.service";

enum class UnitRole { kController, kSampler };

// --cupti-mode: which capability lets the service read restricted GPU profiling counters.
enum class CuptiMode {
  kPerfmon,   // CAP_PERFMON (Linux 5.8+, NVIDIA R565+); the default
  kSysadmin,  // CAP_SYS_ADMIN, for older kernels or drivers; chosen explicitly
  kNone,      // neither
};

// "controller" / "sampler"; kInvalidArgument (reason invalid_role) otherwise.
Result<UnitRole> ParseUnitRole(std::string_view text);
// "perfmon" / "sysadmin" / "none"; kInvalidArgument (reason invalid_cupti_mode) otherwise.
Result<CuptiMode> ParseCuptiMode(std::string_view text);
std::string_view UnitName(UnitRole role);

struct UnitOptions {
  UnitRole role = UnitRole::kController;
  std::string daemon_binary;  // absolute path of expanse-daemon
  std::string user = "slurm";
  // Controller only, required there: the credential config, pinned in EXPANSE_DAEMON_CONFIG.
  // Must not lie below shared_prefix (the daemon refuses a credential on the shared mount).
  std::string config_path;
  // Absolute; required for the sampler, optional for the controller (its config records one).
  std::string shared_prefix;
  CuptiMode cupti_mode = CuptiMode::kPerfmon;
  // --profiling-agent=false is recorded in the unit as EXPANSE_PROFILING_AGENT_ENABLE=0.
  bool profiling_agent = true;
  // Controller only: the slurm.conf the operator named with --slurm-conf, pinned in SLURM_CONF
  // so the daemon's squeue and sacct find that cluster too (a site whose slurm.conf is not
  // where SLURM looks by default); empty: SLURM's own discovery. daemon.env may override it.
  std::string slurm_conf{};
  std::chrono::seconds restart_delay{10};
  // Loaded by systemd (EnvironmentFile=-) and named to the daemon when not the default. Only
  // tests change it; it must be written bare: letters, digits and / _ . : , @ + = -.
  std::string env_file = kDaemonEnvPath;
};

// The unit file text. kInvalidArgument (reason invalid_unit_option) naming the field when a
// value is missing or unsafe: a relative path, a control character, invalid UTF-8, a `..`
// component, a user name systemd would not accept.
Result<std::string> RenderUnit(const UnitOptions& options);

// The format version in the header of a unit written by RenderUnit, or nullopt when `unit_text`
// is not one of ours (an operator's own unit, which reinstall and uninstall must leave alone).
std::optional<int> ManagedUnitFormat(std::string_view unit_text);

// Shared check for values the installer writes into files systemd or a shell reads (paths:
// core/path_rules.h). `field` names the value in the message; the value itself is quoted.
// systemd's strict user-name rule, which it accepts without a warning: [A-Za-z_][A-Za-z0-9_-]*,
// at most 31 characters.
Status CheckUserName(std::string_view field, std::string_view user);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_SYSTEMD_UNIT_H_
