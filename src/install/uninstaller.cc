// `expanse compute uninstall`: the explicit identity reset. Stops collection, removes exactly
// what the install state lists (our files, our hook wiring — never an operator's own files or
// daemon.env) and deprovisions the compute unless --keep-identity. Every step is idempotent, so
// after a failure the same command finishes the job; the state file goes last.

#include "deploy/daemon_config.h"
#include "install/control_plane_client.h"
#include "install/host_changes.h"
#include "install/install_lock.h"
#include "install/install_state.h"
#include "install/install_steps.h"
#include "install/installer.h"
#include "install/journal.h"
#include "install/slurm_wiring.h"
#include "install/systemd_unit.h"

namespace expanse::install {
namespace {

// --shared-prefix and --user say which install the operator means; the install state says what
// was installed. A difference is a mistake to stop at, not a value to act on.
Status CheckFlagsAgainstState(const UninstallOptions& o, const std::optional<InstallState>& state,
                              const Output& out) {
  if (!state) {
    if (!o.shared_prefix.empty() || !o.user.empty())
      out.progress(
          "note: no install state here, so --shared-prefix and --user have nothing to "
          "match and are not used");
    return OkStatus();
  }
  if (!o.shared_prefix.empty() && o.shared_prefix != state->shared_prefix) {
    return FailedPreconditionError("--shared-prefix " + o.shared_prefix +
                                   " is not where this host's " + state->role + " was installed (" +
                                   state->shared_prefix +
                                   "); leave the flag out or give that prefix")
        .WithReason("flag_mismatch");
  }
  if (!o.user.empty() && o.user != state->user) {
    return FailedPreconditionError("--user " + o.user + " is not the account this host's " +
                                   state->role + " was installed for (" + state->user +
                                   "); leave the flag out or give that account")
        .WithReason("flag_mismatch");
  }
  return OkStatus();
}

// Removes directories the install created under the prefix when nothing else is in them.
void RemoveEmptyManagedDirs(Host& host, const std::string& prefix) {
  for (const char* d : {"/lib/systemd", "/lib/cupti-nodes", "/lib", "/hooks", "/bin"})
    (void)host.RemoveDirectory(prefix + d);  // what is left inside is not ours
}

Status UninstallController(const UninstallOptions& o, const HostPaths& paths, const Output& out) {
  Host& host = *paths.host;
  EXPANSE_ASSIGN_OR_RETURN(std::optional<InstallState> state,
                           LoadInstallState(host, paths.state_dir, "controller"));
  EXPANSE_RETURN_IF_ERROR(CheckFlagsAgainstState(o, state, out));
  const std::string config_path = EffectiveConfigPath(!o.config_path.empty() ? o.config_path
                                                      : state                ? state->config_path
                                                                             : "");
  const bool have_config = host.Stat(config_path).has_value();
  if (!state && !have_config) {
    out.progress("nothing to uninstall: no controller install state and no config at " +
                 config_path);
    return OkStatus();
  }
  if (state) {
    out.progress("stopping " +
                 (state->unit_name.empty() ? std::string("the daemon") : state->unit_name));
    DirectChanges changes(host);
    EXPANSE_RETURN_IF_ERROR(
        StopAndRemoveUnit(changes, paths, state->unit_name, state->unit_path, out));
    EXPANSE_RETURN_IF_ERROR(
        RemoveHookWiring(changes, paths, *state, o.slurm_conf, o.reconfigure, out));
    out.progress("removing managed files from " + state->shared_prefix);
    EXPANSE_RETURN_IF_ERROR(RemoveInstalledFiles(changes, paths, *state, out));
    // The worker spool is ours too (the guide has workers uninstalled first). Not a listed
    // tree, because a reinstall must keep samples that are still waiting there.
    if (!state->shared_prefix.empty())
      EXPANSE_RETURN_IF_ERROR(host.RemoveTree(state->shared_prefix + "/spool"));
    RemoveEmptyManagedDirs(host, state->shared_prefix);
  }
  if (have_config && !o.keep_identity) {
    Result<deploy::DaemonConfig> config = deploy::LoadDaemonConfig(host, config_path);
    if (!config.ok())
      return Status(config.status().code(), "cannot deprovision: " + config.status().message());
    out.progress("deprovisioning compute " + config->compute_id);
    EXPANSE_ASSIGN_OR_RETURN(
        ControlPlaneClient cp,
        ControlPlaneClient::Create(config->control_plane_url, CaFileFromEnvironment(*paths.host)));
    Status gone = cp.Deprovision(config->credential);
    if (!gone.ok() && gone.reason() != "credential_revoked" &&
        gone.reason() != "compute_deprovisioned") {
      return Status(gone.code(), "the host is cleaned up but the compute was not deprovisioned: " +
                                     gone.message() + "; run the uninstall again")
          .WithReason(gone.reason());
    }
    // What the daemon queued for this compute can never be delivered now. Removed before the
    // credential: a failure here leaves the config, so running the uninstall again (as the
    // error says) comes back to this step, and a later install never uploads an old
    // compute's batches under a new credential.
    for (const char* runtime : {"outbox", "aggregator", "open-allocations.json",
                                "unsent-closes.json", "sacct-covered-to"})
      EXPANSE_RETURN_IF_ERROR(host.RemoveTree(paths.daemon_state_dir + "/" + runtime));
    EXPANSE_RETURN_IF_ERROR(host.RemoveFile(config_path));
    (void)host.RemoveDirectory(config_path.substr(0, config_path.rfind('/')));  // when empty
    out.progress("credential removed; register a new compute with a fresh install");
  } else if (o.keep_identity) {
    out.progress("--keep-identity: the credential at " + config_path + " stays");
  }
  if (state)
    EXPANSE_RETURN_IF_ERROR(RemoveInstallState(paths, "controller"));
  out.progress("done");
  return OkStatus();
}

Status UninstallSampler(const UninstallOptions& o, const HostPaths& paths, const Output& out) {
  Host& host = *paths.host;
  EXPANSE_ASSIGN_OR_RETURN(std::optional<InstallState> state,
                           LoadInstallState(host, paths.state_dir, "sampler"));
  EXPANSE_RETURN_IF_ERROR(CheckFlagsAgainstState(o, state, out));
  DirectChanges changes(host);
  if (state) {
    out.progress("stopping " + state->unit_name);
    EXPANSE_RETURN_IF_ERROR(
        StopAndRemoveUnit(changes, paths, state->unit_name, state->unit_path, out));
    EXPANSE_RETURN_IF_ERROR(RemoveInstallState(paths, "sampler"));
    out.progress("done");
    return OkStatus();
  }
  // No install state: on a worker under --sampler-bootstrap=prolog (every autoscaled one) the
  // sampler was started by a job's Prolog, under the copy of the shared unit the bootstrap put
  // here or directly. That is collection too, and the guide has every worker uninstalled.
  // Without an install state the name alone does not make the unit ours: one without our
  // header (the site's own, or a mask) is not even stopped.
  const std::string unit_path = paths.unit_dir + "/" + kSamplerUnitName;
  bool have_unit = host.LinkStat(unit_path).has_value();
  if (have_unit && !CheckUnitIsOursOrAbsent(host, unit_path).ok()) {
    out.progress(unit_path + " is not ours (no expanse header); left alone");
    have_unit = false;
  }
  if (have_unit) {
    out.progress("stopping " + std::string(kSamplerUnitName) + " (installed by a job's Prolog)");
    EXPANSE_RETURN_IF_ERROR(StopAndRemoveUnit(changes, paths, kSamplerUnitName, "", out));
  }
  const bool stopped = StopBootstrappedSampler(paths, "uninstalling", out);
  if (!have_unit && !stopped) {
    out.progress(
        "nothing to uninstall: the sampler role is not installed on this host and no sampler a "
        "Prolog started runs here");
    return OkStatus();
  }
  out.progress(
      "note: while the controller's hooks are installed, the next job on this host starts a "
      "sampler again; uninstall the controller next, or drain this host first");
  out.progress("done");
  return OkStatus();
}

}  // namespace

Status RunUninstall(const UninstallOptions& options, const HostPaths& paths, const Output& out) {
  EXPANSE_RETURN_IF_ERROR(FlagProblems(CheckUninstallFlags(options)));
  EXPANSE_ASSIGN_OR_RETURN(InstallLock lock, LockAndRecover(paths, out));
  if (options.role == "sampler")
    return UninstallSampler(options, paths, out);
  return UninstallController(options, paths, out);
}

}  // namespace expanse::install
