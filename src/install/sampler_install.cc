// `expanse compute install --role sampler`: a worker's sampler service, using the daemon binary
// the controller installed on the shared mount. No token, no credential.

#include <signal.h>

#include <chrono>
#include <cstdlib>

#include "install/host_changes.h"
#include "install/host_facts.h"
#include "install/install_state.h"
#include "install/install_steps.h"
#include "install/installer.h"
#include "install/journal.h"
#include "install/systemd_unit.h"
#include "release/cupti_node.h"

namespace expanse::install {
Status InstallSampler(const InstallOptions& o, const HostPaths& paths, const Output& out) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<InstallState> controller,
                           LoadInstallState(*paths.host, paths.state_dir, "controller"));
  if (controller) {
    return FailedPreconditionError(
               "this host runs the controller daemon, which already samples its GPUs; a sampler "
               "here would sample them twice")
        .WithReason("sampler_on_controller");
  }
  EXPANSE_ASSIGN_OR_RETURN(std::optional<InstallState> previous,
                           LoadInstallState(*paths.host, paths.state_dir, "sampler"));

  out.progress("preflight: shared mount, account, systemd");
  Problems problems;
  const std::string daemon = o.shared_prefix + "/bin/expanse-daemon";
  Result<Account> account = LookupAccount(*paths.host, o.user);
  if (!account.ok())
    problems.Add(account.status().message());
  const std::optional<FileInfo> binary = paths.host->Stat(daemon);
  if (!binary || binary->type != FileInfo::Type::kFile || (binary->mode & 0111) == 0) {
    problems.Add("no daemon binary at " + daemon +
                 ": install the controller first, or mount the shared filesystem at " +
                 o.shared_prefix + " on this node");
  } else if (account.ok()) {
    problems.AddIfError(CheckSentinel(*paths.host, o.shared_prefix, *account));
  }
  if (o.systemd) {
    problems.AddIfError(CheckSystemd(paths));
    problems.AddIfError(
        CheckUnitIsOursOrAbsent(*paths.host, paths.unit_dir + "/" + std::string(kSamplerUnitName)));
  }
  EXPANSE_RETURN_IF_ERROR(problems.ToStatus("preflight"));

  UnitOptions unit;
  unit.role = UnitRole::kSampler;
  unit.daemon_binary = daemon;
  unit.user = o.user;
  unit.shared_prefix = o.shared_prefix;
  EXPANSE_ASSIGN_OR_RETURN(unit.cupti_mode, ParseCuptiMode(o.cupti_mode));
  unit.profiling_agent = o.profiling_agent;
  EXPANSE_ASSIGN_OR_RETURN(std::string unit_text, RenderUnit(unit));

  // A Prolog's sampler holds the node's sampler lock, and the service would find it and exit.
  if (o.systemd)
    StopBootstrappedSampler(paths, "the service replaces it", out);
  EXPANSE_ASSIGN_OR_RETURN(Journal journal,
                           Journal::Begin(*paths.host, paths.state_dir + "/journal", paths.faults));
  InstallState state;
  state.role = "sampler";
  state.shared_prefix = o.shared_prefix;
  state.user = o.user;
  state.profiling_agent = o.profiling_agent;
  state.cupti_mode = o.cupti_mode;
  state.cupti_variant = o.cupti_variant;
  state.installed_ms = paths.host->clock().NowMs();
  Status applied = [&]() -> Status {
    if (previous) {
      // Journalled: a failure below starts the previous sampler service again.
      out.progress("replacing the previous sampler service");
      JournalChanges changes(journal);
      EXPANSE_RETURN_IF_ERROR(
          StopAndRemoveUnit(changes, paths, previous->unit_name, previous->unit_path, out));
    }
    EXPANSE_RETURN_IF_ERROR(SeedDaemonEnvFile(
        journal, paths, ProfilingAgentSettings(paths, o.profiling_agent, previous, out), "",
        account->gid, out));
    EXPANSE_RETURN_IF_ERROR(PrepareDaemonStateDir(journal, paths, *account));
    // This worker's CUPTI build, chosen for its own driver from what the controller staged.
    const std::string nodes = o.shared_prefix + "/" + release::kCuptiNodesDir;
    const std::string host = o.hostname.empty() ? ShortHostname() : o.hostname;
    if (paths.host->Stat(o.shared_prefix + "/" + release::kCuptiArtifactsDir)) {
      if (!paths.host->Stat(nodes + "/" + host))
        EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(nodes + "/" + host));
      std::string why;
      const std::optional<std::string> driver = release::LocalDriverVersion(why);
      release::NodeCupti cupti =
          release::EnsureNodeCupti(o.shared_prefix, host, driver, o.cupti_variant);
      out.progress(cupti.note + (driver ? "" : " (" + why + ")"));
    }
    const std::string state_path = StatePath(paths.state_dir, "sampler");
    if (!o.systemd) {
      EXPANSE_RETURN_IF_ERROR(journal.WriteFile(state_path, RenderInstallState(state), 0600));
      out.progress("--systemd=false: install this unit as /etc/systemd/system/" +
                   std::string(kSamplerUnitName) + ":");
      out.text(unit_text);
      return OkStatus();
    }
    state.unit_name = kSamplerUnitName;
    state.unit_path = paths.unit_dir + "/" + kSamplerUnitName;
    EXPANSE_RETURN_IF_ERROR(journal.WriteFile(state_path, RenderInstallState(state), 0600));
    out.progress("starting " + std::string(kSamplerUnitName));
    return InstallAndStartUnit(journal, paths, kSamplerUnitName, unit_text);
  }();
  if (!applied.ok()) {
    out.progress("install failed: " + applied.message());
    out.progress("rolling back " + std::to_string(journal.changes()) + " changes");
    Status undone = Journal::RollBack(*paths.host, journal.dir(), out.detail);
    if (!undone.ok())
      return Status(applied.code(),
                    applied.message() + "; rollback incomplete: " + undone.message());
    return applied;
  }
  EXPANSE_RETURN_IF_ERROR(journal.Commit());
  out.progress("done: the sampler writes to " + o.shared_prefix + "/spool/workers");
  return OkStatus();
}

}  // namespace expanse::install
