#include "install/installer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "core/version_compare.h"
#include "deploy/daemon_config.h"
#include "deploy/templates.h"
#include "install/control_plane_client.h"
#include "install/host_changes.h"
#include "install/host_facts.h"
#include "install/install_lock.h"
#include "install/install_state.h"
#include "install/install_steps.h"
#include "install/journal.h"
#include "install/release_source.h"
#include "install/slurm_wiring.h"
#include "install/systemd_unit.h"
#include "release/cupti_node.h"
#include "release/manifest.h"
#include "release/release_info.h"

namespace expanse::install {
namespace {

std::string ReadOrEmpty(Host& host, const std::string& path) {
  Result<std::optional<std::string>> r = host.ReadFile(path, 1 << 20);
  return r.ok() && *r ? **r : "";
}

bool Exists(Host& host, const std::string& path) { return host.LinkStat(path).has_value(); }

// Everything a controller install decided before changing anything.
struct ControllerPlan {
  Account account;
  std::string hostname;
  std::string config_path;
  std::optional<deploy::DaemonConfig> saved;  // the existing credential config
  std::optional<InstallState> previous;       // what an earlier install left
  ResolvedRelease release;
  std::string prefix;
  HookWrapperPaths hooks;
  std::optional<WiringPlan> wiring;
  std::string control_plane;
  std::string data_plane;
  std::string unit_text;
};

// Removes what an earlier install put on the host, except the credential config (reinstall
// keeps the identity), through the install's journal: if the new install then fails, its
// rollback puts the previous runtime back, running as it was. (The operator guide promises
// less, only that the identity stays; docs/architecture.md says why we do more.)
// `prefix`: the new install's shared prefix. When it is the previous one, the nodes' CUPTI builds
// (<prefix>/lib/cupti-nodes) stay: workers' running jobs have their agent loaded from there,
// and deleting a file from another NFS client can kill them (SIGBUS); each node's Prolog
// replaces its own build in one rename when the new release brings another.
Status CleanUpPrevious(const InstallState& state, const HostPaths& paths, bool reconfigure,
                       const std::string& prefix, Journal& journal, const Output& out) {
  out.progress(
      "removing the previous installation (" +
      (state.daemon_version.empty() ? std::string("unknown version") : state.daemon_version) +
      "); the compute identity is kept, and a failure below puts it back");
  JournalChanges changes(journal);
  EXPANSE_RETURN_IF_ERROR(StopAndRemoveUnit(changes, paths, state.unit_name, state.unit_path, out));
  EXPANSE_RETURN_IF_ERROR(RemoveHookWiring(changes, paths, state, "", reconfigure, out));
  InstallState removed = state;
  if (state.shared_prefix == prefix)
    std::erase(removed.trees, prefix + "/" + release::kCuptiNodesDir);
  return RemoveInstalledFiles(changes, paths, removed, out);
}

Status Preflight(const InstallOptions& o, const HostPaths& paths, ControllerPlan& plan,
                 const Output& out) {
  Problems problems;
  Result<Account> account = LookupAccount(*paths.host, o.user);
  if (account.ok())
    plan.account = *account;
  else
    problems.Add(account.status().message());

  if (!ConfigOnly(o)) {
    if (o.shared_prefix.empty()) {
      problems.Add(
          "--shared-prefix is required: the absolute path of the filesystem every node "
          "mounts (e.g. /srv/expanse)");
    } else {
      problems.AddIfError(CheckPrefixWritable(*paths.host, o.shared_prefix));
    }
    if (o.systemd) {
      problems.AddIfError(CheckSystemd(paths));
      problems.AddIfError(CheckUnitIsOursOrAbsent(
          *paths.host, paths.unit_dir + "/" + std::string(kControllerUnitName)));
    }
    HookWrapperPaths hooks;
    hooks.prolog = o.shared_prefix + "/hooks/prolog";
    hooks.epilog = o.shared_prefix + "/hooks/epilog";
    hooks.taskprolog = o.profiling_agent ? o.shared_prefix + "/hooks/taskprolog" : "";
    plan.hooks = hooks;
    Result<WiringPlan> wiring = PlanWiring(*paths.host, o.slurm_conf, hooks);
    if (wiring.ok()) {
      plan.wiring = *wiring;
      out.progress("slurm.conf: " + wiring->slurm_conf);
      if (!wiring->description.empty())
        out.text(wiring->description);
      for (const std::string& w : wiring->warnings)
        out.progress("warning: " + w);
    } else {
      problems.Add(wiring.status().message());
    }
  }
  if (!o.shared_prefix.empty() && deploy::PathIsUnder(plan.config_path, o.shared_prefix)) {
    problems.Add("the credential config " + plan.config_path + " would be on the shared mount " +
                 o.shared_prefix + "; use --config with a local path");
  }
  // The planes must answer; any HTTP answer proves reachability (credentials come later).
  if (plan.control_plane.empty()) {
    problems.Add(
        "--control-plane is required for a fresh install or a rebuilt controller (the "
        "URL shown in the console's Add compute panel)");
  }
  if (plan.data_plane.empty())
    problems.Add("--data-plane is required for a fresh install or a rebuilt controller");
  return problems.ToStatus("preflight");
}

Status CheckDataPlaneReachable(const HostPaths& paths, const std::string& url) {
  net::HttpClientOptions options;
  options.ca_file = CaFileFromEnvironment(*paths.host);
  options.total_timeout = std::chrono::seconds(15);
  EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> http, net::HttpClient::Create(options));
  net::HttpRequest request;
  request.url = url + "/healthz";
  Result<net::HttpResponse> r = http->Send(request);
  if (!r.ok())
    return UnavailableError("the data plane " + url + " is not reachable: " + r.status().message());
  return OkStatus();
}

Status ApplyController(const InstallOptions& o, const HostPaths& paths, ControllerPlan& plan,
                       std::optional<SecretString>& token, const ComputeSummary* compute,
                       Journal& journal, const Output& out) {
  Host& host = *paths.host;
  const std::string& prefix = plan.prefix;
  const uid_t uid = plan.account.uid;
  const gid_t gid = plan.account.gid;
  InstallState state;
  state.role = "controller";
  state.daemon_version = plan.release.version;
  state.highest_version =
      HigherVersion(plan.previous ? plan.previous->highest_version : "", plan.release.version);
  state.shared_prefix = prefix;
  state.config_path = plan.config_path;
  state.user = o.user;
  state.profiling_agent = o.profiling_agent;
  state.sampler_bootstrap = o.sampler_bootstrap;
  state.cupti_mode = o.cupti_mode;
  state.cupti_variant = o.cupti_variant;
  state.bundled_pyspy = o.bundled_pyspy;
  state.installed_ms = host.clock().NowMs();

  EXPANSE_RETURN_IF_ERROR(PrepareDaemonStateDir(journal, paths, plan.account));
  // This host may have run jobs as a worker before: a sampler a Prolog left here would sample
  // the GPUs the daemon samples. Its unit (the bootstrap's copy) goes, journalled; one started
  // directly is stopped. The Prolog starts none on a controller's host.
  if (Exists(host, paths.unit_dir + "/" + kSamplerUnitName)) {
    JournalChanges changes(journal);
    EXPANSE_RETURN_IF_ERROR(StopAndRemoveUnit(changes, paths, kSamplerUnitName, "", out));
  }
  StopBootstrappedSampler(paths, "the controller daemon samples this host's GPUs", out);
  out.progress("installing the daemon into " + prefix);
  EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(prefix + "/bin", 0755));
  EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(prefix + "/hooks", 0755));
  // The spool fills at run time; a fresh one is adopted whole so an undo removes what the
  // daemon wrote there. An existing one (reinstall) keeps the samples still waiting in it.
  const std::string spool = prefix + "/spool";
  if (!Exists(host, spool)) {
    EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(spool));
    EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(spool, 0755, uid, gid));
  }
  const std::string sentinel = prefix + "/" + deploy::kPreflightSentinelName;
  EXPANSE_RETURN_IF_ERROR(journal.WriteFile(
      sentinel, RenderSentinel(plan.account, plan.hostname, host.clock().NowMs()), 0644, uid, gid));
  state.files.push_back(sentinel);

  const std::string daemon = prefix + "/bin/expanse-daemon";
  // The release is downloaded, verified and unpacked into a scratch directory on this machine's
  // own disk before anything is installed (install/release_source.h); its files are streamed
  // from there into place through the journal.
  EXPANSE_RETURN_IF_ERROR(
      journal.CopyLocalFile(plan.release.daemon_path, daemon, size_t{512} << 20, 0755));
  state.files.push_back(daemon);
  if (o.bundled_pyspy) {
    if (plan.release.pyspy_path.empty()) {
      out.progress("note: this release has no bundled py-spy; set EXPANSE_PYSPY to use your own");
    } else {
      EXPANSE_RETURN_IF_ERROR(journal.CopyLocalFile(plan.release.pyspy_path, prefix + "/bin/py-spy",
                                                    size_t{256} << 20, 0755));
      state.files.push_back(prefix + "/bin/py-spy");
    }
  }
  // CUPTI: every signed build goes to the shared mount for the nodes to choose from; this node
  // takes the one its driver supports now, workers at their sampler install or next Prolog.
  if (!plan.release.cupti_archives.empty()) {
    const std::string artifacts = prefix + "/" + release::kCuptiArtifactsDir;
    const std::string nodes = prefix + "/" + release::kCuptiNodesDir;
    EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(prefix + "/lib", 0755));
    if (!Exists(host, artifacts))
      EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(artifacts));
    EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(artifacts, 0755));
    for (const std::string& archive : plan.release.cupti_archives) {
      const std::string name = archive.substr(archive.rfind('/') + 1);
      for (const std::string& suffix : {std::string(), std::string(release::kSignatureSuffix)}) {
        EXPANSE_RETURN_IF_ERROR(journal.CopyLocalFile(
            archive + suffix, artifacts + "/" + name + suffix, release::kMaxArchiveBytes, 0644));
      }
    }
    EXPANSE_RETURN_IF_ERROR(journal.WriteFile(artifacts + "/" + release::kArtifactsKeyName,
                                              plan.release.key_pem, 0644));
    if (!Exists(host, nodes))
      EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(nodes));
    else if (!Exists(host, nodes + "/" + plan.hostname))
      EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(nodes + "/" + plan.hostname));
    std::string why;
    const std::optional<std::string> driver = release::LocalDriverVersion(why);
    release::NodeCupti cupti = release::EnsureNodeCupti(prefix, plan.hostname, driver,
                                                        o.cupti_variant, plan.release.key_pem);
    out.progress(cupti.note + (driver ? "" : " (" + why + ")"));
    state.trees.push_back(artifacts);
    state.trees.push_back(nodes);
  } else {
    out.progress(plan.release.cupti_note);
    // The nodes' builds a reinstall into the same prefix kept (CleanUpPrevious) are still this
    // install's to remove.
    const std::string nodes = prefix + "/" + release::kCuptiNodesDir;
    if (Exists(host, nodes))
      state.trees.push_back(nodes);
  }

  // Hook wrappers: they run on every node from the shared prefix.
  for (const std::string kind : {"prolog", "epilog", "taskprolog"}) {
    if (kind == "taskprolog" && !o.profiling_agent)
      continue;
    HookScriptSpec spec;
    spec.kind = kind;
    spec.daemon_path = daemon;
    spec.shared_prefix = prefix;
    spec.user = o.user;
    spec.sampler_bootstrap = o.sampler_bootstrap;
    // Each node injects the agent of its own CUPTI build (chosen for its own driver), found by
    // TaskProlog at run time: whether the controller has a GPU says nothing about the workers.
    spec.inject_node_agent = kind == "taskprolog";
    const std::string gres =
        plan.wiring->slurm_conf.substr(0, plan.wiring->slurm_conf.rfind('/')) + "/gres.conf";
    if (Exists(host, gres))
      spec.extra_args = {"--gres-conf", gres};
    spec.site_hook = kind == "prolog"   ? plan.wiring->site_prolog
                     : kind == "epilog" ? plan.wiring->site_epilog
                                        : plan.wiring->site_taskprolog;
    EXPANSE_ASSIGN_OR_RETURN(std::string script, RenderHookWrapper(spec));
    const std::string path = prefix + "/hooks/" + kind;
    EXPANSE_RETURN_IF_ERROR(journal.WriteFile(path, script, 0755));
    state.files.push_back(path);
  }

  // The credential. A fresh install journals it (a failure leaves no trace); a replacement
  // credential is written outside the journal because the exchange has revoked the old one.
  if (token) {
    ExchangeRequest request;
    request.hostname = plan.hostname;
    request.daemon_version = plan.release.version.empty() ? "unknown" : plan.release.version;
    request.slurm_version = SlurmVersion(host);
    out.progress("exchanging the install token for the compute credential");
    EXPANSE_ASSIGN_OR_RETURN(
        ExchangedCredential cred,
        ControlPlaneClient::Create(plan.control_plane, CaFileFromEnvironment(host))
            ->Exchange(token->view(), request));
    token.reset();  // wiped: a failed run never carries it into another step
    deploy::DaemonConfig config;
    config.compute_id = cred.compute.id;
    config.organization = cred.compute.organization_slug;
    config.credential_id = cred.credential_id;
    config.credential = cred.credential;
    // The address this install reached the server at, not the one the server reports for the
    // compute: behind a balancer or a NAT the server knows only its own view.
    config.control_plane_url = plan.control_plane;
    config.data_plane_url = plan.data_plane;
    config.shared_prefix = prefix;
    config.daemon_user = o.user;
    config.written_ms = host.clock().NowMs();
    const std::string dir = plan.config_path.substr(0, plan.config_path.rfind('/'));
    if (plan.saved) {
      EXPANSE_RETURN_IF_ERROR(host.MakeDirectories(dir, 0700));
      EXPANSE_RETURN_IF_ERROR(deploy::SaveDaemonConfig(host, plan.config_path, config, uid, gid));
      out.progress("replacement credential written to " + plan.config_path +
                   " (the previous one is revoked)");
    } else {
      EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(dir, 0700, uid, gid));
      EXPANSE_RETURN_IF_ERROR(
          journal.WriteFile(plan.config_path, deploy::RenderDaemonConfig(config), 0600, uid, gid));
      out.progress("credential written to " + plan.config_path);
    }
    plan.saved = config;
  }
  (void)compute;

  EXPANSE_RETURN_IF_ERROR(SeedDaemonEnvFile(
      journal, paths, ProfilingAgentSettings(paths, o.profiling_agent, plan.previous, out), "",
      plan.account.gid, out));

  // The unit, and the shared copy the worker bootstrap installs on autoscaled nodes.
  UnitOptions unit;
  unit.role = UnitRole::kController;
  unit.daemon_binary = daemon;
  unit.user = o.user;
  unit.config_path = plan.config_path;
  unit.shared_prefix = prefix;
  EXPANSE_ASSIGN_OR_RETURN(unit.cupti_mode, ParseCuptiMode(o.cupti_mode));
  unit.profiling_agent = o.profiling_agent;
  unit.slurm_conf = o.slurm_conf;
  EXPANSE_ASSIGN_OR_RETURN(plan.unit_text, RenderUnit(unit));
  UnitOptions sampler_unit = unit;
  sampler_unit.role = UnitRole::kSampler;
  sampler_unit.config_path.clear();
  sampler_unit.slurm_conf.clear();
  EXPANSE_ASSIGN_OR_RETURN(std::string sampler_text, RenderUnit(sampler_unit));
  EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(prefix + "/lib/systemd", 0755));
  EXPANSE_RETURN_IF_ERROR(
      journal.WriteFile(prefix + "/lib/systemd/" + kSamplerUnitName, sampler_text, 0644));
  state.files.push_back(prefix + "/lib/systemd/" + kSamplerUnitName);

  // slurm.conf, before the service starts so the first job after start is seen.
  if (plan.wiring && o.patch_slurm_conf && !plan.wiring->edits.empty()) {
    // The edits can be in a file slurm.conf includes: name each file that changes.
    std::string files;
    for (const WholeFileEdit& e : plan.wiring->edits)
      files += (files.empty() ? "" : ", ") + e.path;
    out.progress("wiring Prolog/Epilog" + std::string(o.profiling_agent ? "/TaskProlog" : "") +
                 " in " + files);
    if (o.reconfigure) {
      EXPANSE_RETURN_IF_ERROR(
          journal.RunCommand("scontrol reconfigure (after undo)", {}, {"scontrol", "reconfigure"}));
    }
    for (const WholeFileEdit& e : plan.wiring->edits) {
      const std::optional<FileInfo> st = host.Stat(e.path);
      if (!st)
        return NotFoundError(e.path + " vanished during the install");
      if (ReadOrEmpty(host, e.path) != e.before)
        return FailedPreconditionError(e.path + " changed during the install; run it again");
      EXPANSE_RETURN_IF_ERROR(journal.WriteFile(e.path, e.after, st->mode, st->uid, st->gid));
      state.wired_files.push_back(e.path);
    }
    state.slurm_conf = plan.wiring->slurm_conf;
    if (o.reconfigure) {
      EXPANSE_RETURN_IF_ERROR(
          journal.RunCommand("scontrol reconfigure", {"scontrol", "reconfigure"}, {}));
    } else {
      out.progress("run `scontrol reconfigure` to make slurmctld and slurmd load the hooks");
    }
  } else if (plan.wiring && !plan.wiring->edits.empty()) {
    out.progress(
        "slurm.conf left untouched (--patch-slurm-conf=false); add these lines with "
        "your configuration management, then run `scontrol reconfigure`:");
    out.text(plan.wiring->manual_instructions);
  } else if (plan.wiring) {
    state.wired_files = plan.previous ? plan.previous->wired_files : state.wired_files;
    state.slurm_conf = plan.wiring->slurm_conf;
  }

  const std::string state_path = StatePath(paths.state_dir, "controller");
  if (o.systemd) {
    state.unit_name = kControllerUnitName;
    state.unit_path = paths.unit_dir + "/" + kControllerUnitName;
    EXPANSE_RETURN_IF_ERROR(journal.WriteFile(state_path, RenderInstallState(state), 0600));
    EXPANSE_ASSIGN_OR_RETURN(
        ControlPlaneClient cp,
        ControlPlaneClient::Create(plan.saved->control_plane_url, CaFileFromEnvironment(host)));
    // A compute that reported before (a reinstall) is enrolled already: only a heartbeat after
    // the previous daemon stopped, which is this new daemon's, proves the install.
    EXPANSE_ASSIGN_OR_RETURN(const int64_t heard_before,
                             cp.LastHeartbeatMs(plan.saved->credential));
    out.progress("starting " + std::string(kControllerUnitName));
    EXPANSE_RETURN_IF_ERROR(
        InstallAndStartUnit(journal, paths, kControllerUnitName, plan.unit_text));
    out.progress("waiting up to " + std::to_string(o.heartbeat_timeout.count() / 1000) + " s for " +
                 (heard_before > 0 ? "a heartbeat from the new daemon"
                                   : "the first authenticated heartbeat"));
    EXPANSE_ASSIGN_OR_RETURN(bool enrolled, cp.WaitForHeartbeat(plan.saved->credential,
                                                                o.heartbeat_timeout, heard_before));
    if (!enrolled) {
      // The service's own words are the quickest way to the cause (a TLS trust problem, a proxy,
      // a refused credential), so show them before everything is rolled back.
      SubprocessOptions journal_tail;
      journal_tail.argv = {"journalctl", "-u", kControllerUnitName, "-n", "20", "--no-pager"};
      journal_tail.timeout = std::chrono::seconds(10);
      Result<SubprocessResult> tail = host.Run(journal_tail);
      if (tail.ok() && !tail->stdout_text.empty()) {
        out.progress("last lines of the daemon's journal:");
        out.text(tail->stdout_text);
      }
      return DeadlineExceededError(
                 "no authenticated heartbeat arrived within --heartbeat-timeout; see `journalctl "
                 "-u expanse-daemon` for why the daemon could not report")
          .WithReason("heartbeat_timeout");
    }
    out.progress("heartbeat received: compute " + plan.saved->compute_id + " is active");
  } else {
    EXPANSE_RETURN_IF_ERROR(journal.WriteFile(state_path, RenderInstallState(state), 0600));
    out.progress("--systemd=false: install this unit as /etc/systemd/system/" +
                 std::string(kControllerUnitName) + " (or run its ExecStart your own way):");
    out.text(plan.unit_text);
  }
  return OkStatus();
}

Status InstallController(const InstallOptions& o, const HostPaths& paths,
                         std::optional<SecretString> token, const Output& out) {
  Host& host = *paths.host;
  ControllerPlan plan;
  plan.hostname = o.hostname.empty() ? ShortHostname() : o.hostname;
  plan.config_path = EffectiveConfigPath(o.config_path);
  plan.prefix = o.shared_prefix;

  // 1. What is here already.
  if (Exists(host, plan.config_path)) {
    Result<deploy::DaemonConfig> saved = deploy::LoadDaemonConfig(host, plan.config_path);
    if (!o.reinstall) {
      std::string who = saved.ok() ? " (compute " + saved->compute_id + ", organisation " +
                                         saved->organization + ")"
                                   : "";
      return FailedPreconditionError(
                 "existing daemon config found at " + plan.config_path + who +
                 ". To upgrade or repair this compute, re-run with --reinstall (add "
                 "EXPANSE_INSTALL_TOKEN only with a token re-issued for this compute, to replace "
                 "its credential). To register a different compute, run `expanse compute "
                 "uninstall` first. Do not edit or delete the file by hand.")
          .WithReason("existing_config");
    }
    if (!saved.ok()) {
      if (!token) {
        return FailedPreconditionError("the saved config " + plan.config_path +
                                       " cannot be used (" + saved.status().message() +
                                       "); re-issue an install token for this compute and pass "
                                       "it in EXPANSE_INSTALL_TOKEN with --reinstall");
      }
    } else {
      plan.saved = *saved;
    }
  } else if (o.reinstall && !token) {
    return FailedPreconditionError(
               "--reinstall found no saved config at " + plan.config_path +
               ": a rebuilt controller needs a token re-issued in the console (pass it in "
               "EXPANSE_INSTALL_TOKEN) and --control-plane/--data-plane")
        .WithReason("no_saved_config");
  }
  EXPANSE_ASSIGN_OR_RETURN(plan.previous, LoadInstallState(host, paths.state_dir, "controller"));
  plan.control_plane = !o.control_plane.empty() ? o.control_plane
                       : plan.saved             ? plan.saved->control_plane_url
                                                : "";
  plan.data_plane = !o.data_plane.empty() ? o.data_plane
                    : plan.saved          ? plan.saved->data_plane_url
                                          : "";
  if (!plan.control_plane.empty())
    while (plan.control_plane.ends_with('/'))
      plan.control_plane.pop_back();
  if (Exists(host, StatePath(paths.state_dir, "sampler"))) {
    return FailedPreconditionError(
        "this host has the sampler role installed; uninstall it first (`expanse compute "
        "uninstall --role sampler`): the controller daemon samples this host's GPUs itself");
  }

  // 2. Preflight: every problem at once, before the token is used.
  out.progress("preflight: paths, permissions, account, SLURM configuration, hooks");
  EXPANSE_RETURN_IF_ERROR(Preflight(o, paths, plan, out));

  // 3. The release, verified and staged (downloads happen before any change).
  const std::string staging = StagingRoot(paths) + "/staging." + std::to_string(getpid());
  struct StagingCleanup {
    std::string dir;
    ~StagingCleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{staging};
  if (!ConfigOnly(o)) {
    if (o.daemon_version.empty() && o.daemon_binary.empty()) {
      return InvalidArgumentError(
                 "give --daemon-version (the version shown in the console) or "
                 "--daemon-binary (a staged archive)")
          .WithReason("no_release");
    }
    EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(StagingRoot(paths), 0700));
    EXPANSE_ASSIGN_OR_RETURN(plan.release,
                             ResolveRelease(o, staging, CaFileFromEnvironment(host),
                                            [&](const std::string& line) { out.progress(line); }));
    const std::string highest = plan.previous ? plan.previous->highest_version : "";
    if (!plan.release.version.empty() && !highest.empty() &&
        CompareVersions(plan.release.version, highest) < 0 && !o.allow_downgrade) {
      return FailedPreconditionError("daemon " + plan.release.version + " is older than " +
                                     highest +
                                     ", already installed here; pass --allow-downgrade if you "
                                     "mean to go back")
          .WithReason("downgrade_refused");
    }
  }

  // 4. The token: only now, and checked against the compute before anything changes.
  const ComputeSummary* compute = nullptr;
  ComputeSummary summary;
  if (!plan.saved || token) {
    EXPANSE_ASSIGN_OR_RETURN(TokenIntake intake,
                             ObtainInstallToken(std::move(token), /*allow_prompt=*/!o.reinstall));
    EXPANSE_RETURN_IF_ERROR(CheckTokenShape(intake.token.view()));
    EXPANSE_ASSIGN_OR_RETURN(
        ControlPlaneClient cp,
        ControlPlaneClient::Create(plan.control_plane, CaFileFromEnvironment(host)));
    Result<ComputeSummary> intro = cp.Introspect(intake.token.view());
    if (!intro.ok()) {
      return Status(intro.status().code(),
                    "the install token was refused before anything changed: " +
                        intro.status().message())
          .WithReason(intro.status().reason());
    }
    summary = *intro;
    if (plan.saved && summary.id != plan.saved->compute_id) {
      return FailedPreconditionError(
                 "this install token belongs to compute " + summary.id + " ('" + summary.name +
                 "'), but this controller is registered as " + plan.saved->compute_id +
                 "; nothing was changed and the saved identity stays. Re-issue the token from "
                 "this compute's console page, or uninstall to register a different compute.")
          .WithReason("token_for_other_compute");
    }
    out.progress("install token is for compute '" + summary.name + "' (" + summary.id +
                 ") in organisation " + summary.organization_slug);
    compute = &summary;
    token = std::move(intake.token);
  }
  if (!ConfigOnly(o))
    EXPANSE_RETURN_IF_ERROR(CheckDataPlaneReachable(paths, plan.data_plane));

  // 5. Apply.
  EXPANSE_ASSIGN_OR_RETURN(Journal journal,
                           Journal::Begin(host, paths.state_dir + "/journal", paths.faults));
  Status applied;
  if (ConfigOnly(o)) {
    plan.release.version = o.daemon_version;
    applied = [&]() -> Status {
      if (!token)
        return OkStatus();
      ExchangeRequest request;
      request.hostname = plan.hostname;
      request.daemon_version = o.daemon_version.empty() ? "config-only" : o.daemon_version;
      EXPANSE_ASSIGN_OR_RETURN(
          ControlPlaneClient cp,
          ControlPlaneClient::Create(plan.control_plane, CaFileFromEnvironment(host)));
      EXPANSE_ASSIGN_OR_RETURN(ExchangedCredential cred, cp.Exchange(token->view(), request));
      token.reset();
      deploy::DaemonConfig config;
      config.compute_id = cred.compute.id;
      config.organization = cred.compute.organization_slug;
      config.credential_id = cred.credential_id;
      config.credential = cred.credential;
      config.control_plane_url = plan.control_plane;
      config.data_plane_url = plan.data_plane;
      config.shared_prefix = o.shared_prefix;
      config.daemon_user = o.user;
      config.written_ms = host.clock().NowMs();
      const std::string dir = plan.config_path.substr(0, plan.config_path.rfind('/'));
      if (plan.saved) {
        EXPANSE_RETURN_IF_ERROR(host.MakeDirectories(dir, 0700));
        return deploy::SaveDaemonConfig(host, plan.config_path, config, plan.account.uid,
                                        plan.account.gid);
      }
      EXPANSE_RETURN_IF_ERROR(
          journal.MakeDirectories(dir, 0700, plan.account.uid, plan.account.gid));
      EXPANSE_RETURN_IF_ERROR(journal.WriteFile(plan.config_path,
                                                deploy::RenderDaemonConfig(config), 0600,
                                                plan.account.uid, plan.account.gid));
      out.progress("credential written to " + plan.config_path + " (config only; no runtime)");
      return OkStatus();
    }();
  } else {
    applied = [&]() -> Status {
      if (o.reinstall && plan.previous) {
        EXPANSE_RETURN_IF_ERROR(
            CleanUpPrevious(*plan.previous, paths, o.reconfigure, o.shared_prefix, journal, out));
        // The cleanup put the site's own hook lines back: plan the wiring again from there.
        EXPANSE_ASSIGN_OR_RETURN(plan.wiring, PlanWiring(host, o.slurm_conf, plan.hooks));
      }
      return ApplyController(o, paths, plan, token, compute, journal, out);
    }();
  }
  if (!applied.ok()) {
    out.progress("install failed: " + applied.message());
    out.progress("rolling back " + std::to_string(journal.changes()) + " change" +
                 (journal.changes() == 1 ? "" : "s"));
    Status undone = Journal::RollBack(host, journal.dir(), out.detail);
    if (!undone.ok()) {
      // A damaged journal line says itself what to do; re-running would not finish it.
      const bool retry_finishes = undone.reason() != "bad_journal";
      return Status(applied.code(),
                    applied.message() + "; rollback incomplete: " + undone.message() +
                        (retry_finishes ? " (re-run the install to finish it)" : ""))
          .WithReason(applied.reason());
    }
    out.progress("the host is as it was before this install" +
                 std::string(o.reinstall && plan.previous
                                 ? " (the previous installation is back in place)"
                                 : ""));
    return applied;
  }
  EXPANSE_RETURN_IF_ERROR(journal.Commit());
  out.progress("done");
  return OkStatus();
}

}  // namespace

Status RunInstall(const InstallOptions& options, const HostPaths& paths,
                  std::optional<SecretString> token, const Output& out) {
  EXPANSE_RETURN_IF_ERROR(FlagProblems(CheckInstallFlags(options)));
  EXPANSE_ASSIGN_OR_RETURN(InstallLock lock, LockAndRecover(paths, out));
  if (options.role == "sampler") {
    if (token)
      out.progress("note: EXPANSE_INSTALL_TOKEN is ignored: samplers use no credential");
    return InstallSampler(options, paths, out);
  }
  return InstallController(options, paths, std::move(token), out);
}

}  // namespace expanse::install
