#include "install/install_steps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/env_file.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "core/version_compare.h"
#include "deploy/templates.h"
#include "install/daemon_env.h"
#include "install/host_changes.h"
#include "install/slurm_wiring.h"
#include "install/systemd_unit.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::install {

using nlohmann::json;

Status FlagProblems(const std::vector<std::string>& problems) {
  if (problems.empty())
    return OkStatus();
  std::string text = "the flags cannot be used together:";
  for (const std::string& p : problems)
    text += "\n  - " + p;
  return InvalidArgumentError(text).WithReason("usage");
}

Result<InstallLock> LockAndRecover(const HostPaths& paths, const Output& out) {
  // Root-only: the journal in here is replayed by root.
  Status dir = fs::MakeDirectories(paths.lock_path.substr(0, paths.lock_path.rfind('/')), 0700);
  if (!dir.ok() && dir.code() == StatusCode::kPermissionDenied) {
    return PermissionDeniedError("open install lock " + paths.lock_path +
                                 ": permission denied; re-run with sudo")
        .WithReason("install_lock_permission");
  }
  EXPANSE_RETURN_IF_ERROR(dir);
  EXPANSE_ASSIGN_OR_RETURN(InstallLock lock, InstallLock::Acquire(paths.lock_path));
  const std::string journal_dir = paths.state_dir + "/journal";
  if (Journal::Pending(*paths.host, journal_dir)) {
    out.progress("an earlier install was interrupted; rolling back its changes first");
    EXPANSE_RETURN_IF_ERROR(Journal::RollBack(*paths.host, journal_dir, out.detail));
  }
  // Downloads an interrupted run staged (nothing else can be using them: we hold the lock).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(StagingRoot(paths), ec)) {
    if (entry.path().filename().string().starts_with("staging."))
      std::filesystem::remove_all(entry.path(), ec);
  }
  return lock;
}

std::string StagingRoot(const HostPaths& paths) {
  return paths.staging_dir.empty() ? paths.state_dir : paths.staging_dir;
}

Status Problems::ToStatus(const std::string& what) const {
  if (list_.empty())
    return OkStatus();
  std::string text = what + " found " + std::to_string(list_.size()) + " problem" +
                     (list_.size() == 1 ? "" : "s") + "; nothing was changed:";
  for (const std::string& p : list_)
    text += "\n  - " + p;
  return FailedPreconditionError(text).WithReason("preflight_failed");
}

Status CheckPrefixWritable(Host& host, const std::string& prefix) {
  const std::optional<FileInfo> st = host.Stat(prefix);
  if (!st) {
    return NotFoundError("--shared-prefix " + prefix +
                         " does not exist (mount the shared filesystem there first)");
  }
  if (st->type != FileInfo::Type::kDirectory)
    return FailedPreconditionError("--shared-prefix " + prefix + " is not a directory");
  const std::string probe = prefix + "/.expanse-write-probe";
  Status written = host.WriteFile(probe, "", 0600, 0, 0);
  if (!written.ok()) {
    return PermissionDeniedError("cannot create files in --shared-prefix " + prefix + ": " +
                                 written.message() +
                                 " (read-only mount, or root squashed by NFS?)");
  }
  return host.RemoveFile(probe);
}

std::string RenderSentinel(const Account& account, const std::string& controller_host,
                           int64_t now_ms) {
  return json{{"format", 1},        {"user", account.name},          {"uid", account.uid},
              {"gid", account.gid}, {"controller", controller_host}, {"written_ms", now_ms}}
             .dump() +
         "\n";
}

Status CheckSentinel(Host& host, const std::string& prefix, const Account& local) {
  const std::string path = prefix + "/" + deploy::kPreflightSentinelName;
  const std::optional<FileInfo> st = host.LinkStat(path);
  if (!st || st->type != FileInfo::Type::kFile) {
    return FailedPreconditionError(
               path +
               " is missing: this is not the shared mount the controller installed into "
               "(or the controller is not installed yet)")
        .WithReason("sentinel_missing");
  }
  // The shared mount is writable from more than this host: the sentinel is outside input.
  Result<std::optional<std::string>> text = host.ReadFile(path, 4096);
  Result<json> doc = NotFoundError(path);
  if (text.ok() && *text)
    doc = wire::ParseJson(**text, wire::JsonLimits{.max_depth = 2});
  if (!doc.ok() || !doc->is_object())
    return FailedPreconditionError(path + " is not a sentinel written by expanse");
  Result<wire::FieldReader> sentinel = wire::FieldReader::Object(*doc, path, "bad_sentinel");
  const int64_t uid = sentinel->Int("uid", -1, UINT32_MAX, wire::Need::kOptional, -1).value_or(-1);
  const int64_t gid = sentinel->Int("gid", -1, UINT32_MAX, wire::Need::kOptional, -1).value_or(-1);
  const std::string user = sentinel->Text("user", 64, wire::Need::kOptional).value_or("?");
  if (uid != static_cast<int64_t>(local.uid) || gid != static_cast<int64_t>(local.gid) ||
      st->uid != local.uid) {
    return FailedPreconditionError(
               "UID/GID mismatch across the shared mount: the controller's account '" + user +
               "' is " + std::to_string(uid) + ":" + std::to_string(gid) +
               " (sentinel file owned by uid " + std::to_string(st->uid) + "), here '" +
               local.name + "' is " + std::to_string(local.uid) + ":" + std::to_string(local.gid) +
               "; make them the same on every node")
        .WithReason("uid_mismatch");
  }
  return OkStatus();
}

Status CheckSystemd(const HostPaths& paths) {
  Host& host = *paths.host;
  const std::optional<FileInfo> runtime = host.Stat(paths.systemd_runtime_dir);
  if (!runtime || runtime->type != FileInfo::Type::kDirectory) {
    return FailedPreconditionError("systemd is not running on this host (no " +
                                   paths.systemd_runtime_dir +
                                   "); use --systemd=false to print the unit and run the service "
                                   "another way")
        .WithReason("systemd_missing");
  }
  SubprocessOptions options;
  options.argv = {"systemctl", "--version"};
  Result<SubprocessResult> r = host.Run(options);
  if (!r.ok() || !r->Succeeded())
    return FailedPreconditionError("systemctl is not usable on this host");
  return OkStatus();
}

Status InstallAndStartUnit(Journal& journal, const HostPaths& paths, const std::string& unit_name,
                           const std::string& unit_text) {
  EXPANSE_RETURN_IF_ERROR(journal.RunCommand("systemctl daemon-reload (after undo)", {},
                                             {"systemctl", "daemon-reload"}));
  EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(paths.unit_dir, 0755));
  EXPANSE_RETURN_IF_ERROR(journal.WriteFile(paths.unit_dir + "/" + unit_name, unit_text, 0644));
  EXPANSE_RETURN_IF_ERROR(
      journal.RunCommand("systemctl daemon-reload", {"systemctl", "daemon-reload"}, {}));
  return journal.RunCommand("systemctl enable --now " + unit_name,
                            {"systemctl", "enable", "--now", unit_name},
                            {"systemctl", "disable", "--now", unit_name});
}

Status CheckUnitIsOursOrAbsent(Host& host, const std::string& path) {
  Result<std::optional<std::string>> text = host.ReadFile(path, 1 << 20);
  if (!text.ok() || !*text || ManagedUnitFormat(**text))
    return OkStatus();
  return FailedPreconditionError(path +
                                 " exists and was not written by expanse compute install; move "
                                 "it away (it is yours) or use --systemd=false")
      .WithReason("foreign_unit");
}

namespace {

// `systemctl is-<state> <unit>` says yes (is-active, is-enabled).
bool UnitIs(Host& host, const std::string& state, const std::string& unit_name) {
  SubprocessOptions options;
  options.argv = {"systemctl", "is-" + state, "--quiet", unit_name};
  options.timeout = std::chrono::seconds(30);
  Result<SubprocessResult> r = host.Run(options);
  return r.ok() && r->Succeeded();
}

}  // namespace

Status StopAndRemoveUnit(HostChanges& changes, const HostPaths& paths, const std::string& unit_name,
                         const std::string& unit_path, const Output& out) {
  if (unit_name.empty())
    return OkStatus();
  Host& host = *paths.host;
  const bool have_systemd = host.Stat(paths.systemd_runtime_dir).has_value();
  if (have_systemd) {
    // A rollback gives the unit back the state it had, no more: an operator's stopped or
    // disabled daemon stays so.
    const bool active = UnitIs(host, "active", unit_name);
    const bool enabled = UnitIs(host, "enabled", unit_name);
    std::vector<std::string> undo;
    if (enabled)
      undo = active ? std::vector<std::string>{"systemctl", "enable", "--now", unit_name}
                    : std::vector<std::string>{"systemctl", "enable", unit_name};
    else if (active)
      undo = {"systemctl", "start", unit_name};
    Status stopped = changes.RunCommand("systemctl disable --now " + unit_name,
                                        {"systemctl", "disable", "--now", unit_name}, undo);
    if (!stopped.ok())
      out.detail(stopped.message());
  }
  const std::string path = unit_path.empty() ? paths.unit_dir + "/" + unit_name : unit_path;
  if (!CheckUnitIsOursOrAbsent(host, path).ok()) {
    out.progress(path + " is not ours (no expanse header); left in place");
    return OkStatus();
  }
  if (have_systemd) {
    // On rollback: after the unit file is back and before the unit is started again.
    EXPANSE_RETURN_IF_ERROR(changes.RunCommand("systemctl daemon-reload (after undo)", {},
                                               {"systemctl", "daemon-reload"}));
  }
  EXPANSE_RETURN_IF_ERROR(changes.RemoveFile(path));
  if (have_systemd) {
    Status reloaded =
        changes.RunCommand("systemctl daemon-reload", {"systemctl", "daemon-reload"}, {});
    if (!reloaded.ok())
      out.detail(reloaded.message());
  }
  return OkStatus();
}

bool StopBootstrappedSampler(const HostPaths& paths, const std::string& why, const Output& out) {
  Host& host = *paths.host;
  Result<std::optional<std::string>> pid_text =
      host.ReadFile(paths.daemon_state_dir + "/sampler/sampler.pid", 256);
  long pid = 0;
  if (!pid_text.ok() || !*pid_text || (pid = std::atol((*pid_text)->c_str())) <= 1)
    return false;
  Result<std::optional<std::string>> cmdline =
      host.ReadFile("/proc/" + std::to_string(pid) + "/cmdline", 1 << 16);
  if (!cmdline.ok() || !*cmdline ||
      (*cmdline)->find(std::string("--role\0sampler", 14)) == std::string::npos)
    return false;  // a stale pid file: that process is something else now
  out.progress("stopping the sampler a Prolog started (pid " + std::to_string(pid) + "); " + why);
  (void)host.SignalProcess(static_cast<pid_t>(pid), SIGTERM);
  for (int i = 0; i < 100 && host.SignalProcess(static_cast<pid_t>(pid), 0).ok(); ++i)
    host.Sleep(std::chrono::milliseconds(100));
  return true;
}

std::vector<std::pair<std::string, std::string>> ProfilingAgentSettings(
    const HostPaths& paths, bool profiling_agent, const std::optional<InstallState>& previous,
    const Output& out) {
  constexpr char kKey[] = "EXPANSE_PROFILING_AGENT_ENABLE";
  if (!profiling_agent)
    return {{kKey, "0"}};
  Result<std::optional<std::string>> text =
      paths.host->ReadFile(paths.daemon_env, kMaxEnvFileBytes);
  if (!text.ok() || !*text)
    return {};  // no file, or one SeedDaemonEnvFile reports on
  Result<EnvFile> parsed = ParseEnvFile(**text);
  if (!parsed.ok() || parsed->Get(kKey) != std::optional<std::string_view>("0"))
    return {};
  if (previous && !previous->profiling_agent) {
    out.progress(paths.daemon_env + ": " + kKey +
                 "=0, which the earlier install wrote for --profiling-agent=false, becomes 1");
    return {{kKey, "1"}};
  }
  out.progress("warning: " + paths.daemon_env + " sets " + kKey +
               "=0, which overrides --profiling-agent=true: this node's services keep in-process "
               "capture off until that line is removed and they are restarted");
  return {};
}

Status SeedDaemonEnvFile(Journal& journal, const HostPaths& paths,
                         const std::vector<std::pair<std::string, std::string>>& extra,
                         const std::string& secret, gid_t daemon_gid, const Output& out) {
  Host& host = *paths.host;
  SeedValues values;
  values.network = NetworkSettingsFromEnvironment(host.Environment());
  for (const auto& [k, v] : extra)
    values.runtime_settings.push_back(EnvEntry{k, v});
  if (!secret.empty())
    values.secrets.push_back(secret);
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> existing,
                           host.ReadFile(paths.daemon_env, kMaxEnvFileBytes));
  EXPANSE_ASSIGN_OR_RETURN(std::string seeded, SeedDaemonEnv(existing.value_or(""), values));
  const std::optional<FileInfo> st = host.Stat(paths.daemon_env);
  const bool readable_by_daemon =
      st && ((st->gid == daemon_gid && (st->mode & 0040)) || (st->mode & 0004));
  if (existing && *existing == seeded && readable_by_daemon)
    return OkStatus();
  EXPANSE_ASSIGN_OR_RETURN(EnvKeyChanges changes, DiffEnvKeys(existing.value_or(""), seeded));
  out.detail(DescribeEnvKeyChanges(paths.daemon_env, changes));
  const std::string dir = paths.daemon_env.substr(0, paths.daemon_env.rfind('/'));
  EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(dir, 0755));
  // 0640 root:<daemon group>: a proxy URL may carry a password, and the daemon, which runs as
  // the daemon account, reads the file itself too (systemd reads it as root for the unit).
  return journal.WriteFile(paths.daemon_env, seeded, 0640, 0, daemon_gid);
}

Status PrepareDaemonStateDir(Journal& journal, const HostPaths& paths, const Account& account) {
  Host& host = *paths.host;
  const std::string& dir = paths.daemon_state_dir;
  // What the service creates at run time is adopted too, so that undoing a failed install (say,
  // no heartbeat) also removes the outbox and the rest the daemon made meanwhile.
  if (!host.LinkStat(dir)) {
    const std::string parent = dir.substr(0, dir.rfind('/'));
    EXPANSE_RETURN_IF_ERROR(journal.MakeDirectories(parent, 0755));
    EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(dir));
    EXPANSE_RETURN_IF_ERROR(host.MakeDirectories(dir, 0755));
  } else {
    for (const char* made_at_run_time :
         {"outbox", "aggregator", "control", "events", "sampler", "open-allocations.json",
          "unsent-closes.json", "sacct-covered-to", "sampler.log"}) {
      const std::string path = dir + "/" + made_at_run_time;
      if (!host.LinkStat(path))
        EXPANSE_RETURN_IF_ERROR(journal.AdoptNewTree(path));
    }
  }
  EXPANSE_RETURN_IF_ERROR(journal.Chown(dir, account.uid, account.gid));
  // Directories an earlier run (hooks as root, a daemon as another account) may have made.
  for (const char* sub : {"outbox", "aggregator", "sampler", "control", "events"}) {
    const std::string subdir = dir + "/" + sub;
    const std::optional<FileInfo> info = host.LinkStat(subdir);
    if (!info || info->type != FileInfo::Type::kDirectory)
      continue;
    EXPANSE_RETURN_IF_ERROR(journal.Chown(subdir, account.uid, account.gid));
    // And what is in them: a sampler lock left by a sampler that ran as root keeps the
    // service (as the daemon account) from ever starting.
    EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names, host.ListDirectory(subdir));
    for (const std::string& name : names) {
      const std::string path = subdir + "/" + name;
      const std::optional<FileInfo> entry = host.LinkStat(path);
      if (entry &&
          (entry->type == FileInfo::Type::kFile || entry->type == FileInfo::Type::kDirectory))
        EXPANSE_RETURN_IF_ERROR(journal.Chown(path, account.uid, account.gid));
    }
  }
  return OkStatus();
}

Status RemoveHookWiring(HostChanges& changes, const HostPaths& paths, const InstallState& state,
                        const std::string& slurm_conf_flag, bool reconfigure, const Output& out) {
  Host& host = *paths.host;
  const std::string conf = !slurm_conf_flag.empty() ? slurm_conf_flag : state.slurm_conf;
  EXPANSE_ASSIGN_OR_RETURN(std::vector<WholeFileEdit> edits,
                           PlanUnwiring(host, state.wired_files, conf));
  if (edits.empty())
    return OkStatus();
  const std::vector<std::string> scontrol_reconfigure = {"scontrol", "reconfigure"};
  if (reconfigure) {
    // On rollback: once the wiring is back, SLURM is told to call the hooks again.
    EXPANSE_RETURN_IF_ERROR(
        changes.RunCommand("scontrol reconfigure (after undo)", {}, scontrol_reconfigure));
  }
  for (const WholeFileEdit& e : edits) {
    const std::optional<FileInfo> info = host.Stat(e.path);
    if (!info)
      continue;
    EXPANSE_RETURN_IF_ERROR(changes.WriteFile(e.path, e.after, info->mode, info->uid, info->gid));
    out.progress("removed the Expanse hook wiring from " + e.path);
  }
  if (!reconfigure) {
    out.progress("run `scontrol reconfigure` so SLURM stops calling the removed hooks");
    return OkStatus();
  }
  return changes.RunCommand("scontrol reconfigure", scontrol_reconfigure, {});
}

Status RemoveInstalledFiles(HostChanges& changes, const HostPaths& paths, const InstallState& state,
                            const Output& out) {
  Host& host = *paths.host;
  std::vector<std::string> all = state.files;
  all.insert(all.end(), state.trees.begin(), state.trees.end());
  for (const std::string& path : all) {
    const bool present = host.LinkStat(path).has_value();
    EXPANSE_RETURN_IF_ERROR(changes.RemoveTree(path));
    if (present)
      out.detail("removed " + path);
  }
  return OkStatus();
}

Status RemoveInstallState(const HostPaths& paths, const std::string& role) {
  return paths.host->RemoveFile(StatePath(paths.state_dir, role));
}

std::string CaFileFromEnvironment(Host& host) { return host.GetEnv("SSL_CERT_FILE").value_or(""); }

std::string HigherVersion(const std::string& a, const std::string& b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  return CompareVersions(a, b) >= 0 ? a : b;
}

}  // namespace expanse::install
