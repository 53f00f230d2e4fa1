// Pieces the install and uninstall flows share: the preflight problem list, systemd steps,
// daemon.env seeding, install-state writing and the shared-prefix sentinel.

#ifndef EXPANSE_INSTALL_INSTALL_STEPS_H_
#define EXPANSE_INSTALL_INSTALL_STEPS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "install/host_changes.h"
#include "install/host_facts.h"
#include "install/install_lock.h"
#include "install/install_options.h"
#include "install/install_state.h"
#include "install/installer.h"
#include "install/journal.h"

namespace expanse::install {

// kInvalidArgument (reason usage) listing the flag problems, or OK when there are none.
Status FlagProblems(const std::vector<std::string>& problems);

// Takes the install lock, then rolls back the journal of an install that was interrupted (killed,
// or the machine went down), so every command starts from a consistent host.
Result<InstallLock> LockAndRecover(const HostPaths& paths, const Output& out);

// Where releases are staged (HostPaths::staging_dir, or the state directory).
std::string StagingRoot(const HostPaths& paths);

// Collects every preflight problem so the operator sees them all at once.
class Problems {
 public:
  void Add(std::string problem) { list_.push_back(std::move(problem)); }
  void AddIfError(const Status& s) {
    if (!s.ok())
      Add(s.message());
  }
  bool empty() const { return list_.empty(); }
  // kFailedPrecondition (reason preflight_failed) listing each problem on its own line.
  Status ToStatus(const std::string& what) const;

 private:
  std::vector<std::string> list_;
};

// The shared prefix exists, is a directory and root can create files in it (a probe file is
// made and removed at once).
Status CheckPrefixWritable(Host& host, const std::string& prefix);

// The text of the sentinel the controller writes and workers check: who owns the shared mount's
// files, by number, so a UID/GID mismatch between nodes shows up before samples go missing.
std::string RenderSentinel(const Account& account, const std::string& controller_host,
                           int64_t now_ms);
// A worker's check of the sentinel: present (same mount), owned by the local account's UID and
// naming the same UID/GID.
Status CheckSentinel(Host& host, const std::string& prefix, const Account& local);

// systemd running (its runtime directory exists) and systemctl present.
Status CheckSystemd(const HostPaths& paths);

// Installs `unit_text` as `unit_name` and starts it, journalled: daemon-reload on undo, write,
// daemon-reload, enable --now (undo: disable --now).
Status InstallAndStartUnit(Journal& journal, const HostPaths& paths, const std::string& unit_name,
                           const std::string& unit_text);

// OK when no unit file is at `path` or the one there carries our header; otherwise a problem
// naming it: an operator's own unit is never overwritten or removed.
Status CheckUnitIsOursOrAbsent(Host& host, const std::string& path);

// Stops, disables and removes a unit we installed, through `changes` (uninstall: at once;
// reinstall: journalled, so a rollback puts the unit back as it was, running or not). A missing
// unit, or a failing stop, is fine.
Status StopAndRemoveUnit(HostChanges& changes, const HostPaths& paths, const std::string& unit_name,
                         const std::string& unit_path, const Output& out);

// A sampler a Prolog started on this host (its pid file in the daemon's state directory, the
// process still a `--role sampler`) is sent SIGTERM and waited for up to 10 s; `why` ends the
// progress line. Not journalled: were the install undone, the next job's Prolog starts one.
// True when there was one to stop.
bool StopBootstrappedSampler(const HostPaths& paths, const std::string& why, const Output& out);

// The daemon.env settings an install with --profiling-agent=`profiling_agent` seeds. false
// records EXPANSE_PROFILING_AGENT_ENABLE=0 (the file outlives units an upgrade without the flag
// renders). true undoes that 0 when `previous` says an earlier install of this role wrote it
// (the file wins over the unit, so the flag would otherwise be silently ignored); a 0 the
// operator wrote is kept, with a warning that it overrides the flag.
std::vector<std::pair<std::string, std::string>> ProfilingAgentSettings(
    const HostPaths& paths, bool profiling_agent, const std::optional<InstallState>& previous,
    const Output& out);

// Seeds daemon.env with the proxy/CA settings from our own environment and `extra` settings,
// keeping what is there; never writes `secret`. Journalled.
Status SeedDaemonEnvFile(Journal& journal, const HostPaths& paths,
                         const std::vector<std::pair<std::string, std::string>>& extra,
                         const std::string& secret, gid_t daemon_gid, const Output& out);

// The daemon's node-local state directory (/var/lib/expanse: outbox, hook events, sampler
// state), owned by the daemon account so the service can write there. Journalled.
Status PrepareDaemonStateDir(Journal& journal, const HostPaths& paths, const Account& account);

// Takes our hook wiring out of the files `state` lists and of the slurm.conf in use (the flag,
// else the one the state names), then runs `scontrol reconfigure` or says to. Through
// `changes`, as StopAndRemoveUnit. The plan itself still reads slurm.conf from the machine
// (slurm::ReadSlurmConf takes no Host yet).
Status RemoveHookWiring(HostChanges& changes, const HostPaths& paths, const InstallState& state,
                        const std::string& slurm_conf_flag, bool reconfigure, const Output& out);

// Removes the files and trees an install recorded in `state` (binaries, scripts, CUPTI per
// host), each named at --verbose; what is already gone is fine. Through `changes`.
Status RemoveInstalledFiles(HostChanges& changes, const HostPaths& paths, const InstallState& state,
                            const Output& out);
// Removes the install state of `role` ("controller" or "sampler"): the role is no longer here.
Status RemoveInstallState(const HostPaths& paths, const std::string& role);

// $SSL_CERT_FILE, the CA bundle the installer trusts for the planes and releases ("" = system).
std::string CaFileFromEnvironment(Host& host);

// The higher of two release versions ("" counts as lowest).
std::string HigherVersion(const std::string& a, const std::string& b);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALL_STEPS_H_
