// The controller-side checks: slurm.conf wiring, cgroup.conf, the spool, the credential and
// planes, disk and outbox headroom.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <utility>

#include "core/quote.h"
#include "doctor/checks.h"

namespace expanse::doctor {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool ListHas(const std::string& list, const std::string& item) {
  // TaskPlugin=task/affinity,task/cgroup: comma-separated, compared as SLURM does, any case.
  const std::string lower = Lower(list);
  size_t start = 0;
  while (start <= lower.size()) {
    size_t comma = lower.find(',', start);
    if (comma == std::string::npos)
      comma = lower.size();
    std::string part = lower.substr(start, comma - start);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (part == item)
      return true;
    start = comma + 1;
  }
  return false;
}

std::string MiB(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

void CheckSlurmConf(const SlurmConfFacts& conf, std::vector<Finding>& out) {
  if (!conf.error.empty()) {
    out.push_back(ActionFinding("SLURM_CONF_UNREADABLE", "",
                                "cannot read slurm.conf" +
                                    (conf.path.empty() ? std::string() : " (" + conf.path + ")") +
                                    ": " + conf.error,
                                "pass --slurm-conf /path/to/slurm.conf, or set SLURM_CONF"));
    return;
  }
  const std::string reconfigure = "then run `scontrol reconfigure`";
  for (const HookFacts& hook : conf.hooks) {
    if (!hook.wanted || hook.is_expanse)
      continue;
    if (!hook.overridden_expanse_at.empty()) {
      out.push_back(
          ActionFinding("HOOK_OVERRIDDEN", "",
                        hook.key + " is wired to Expanse at " + hook.overridden_expanse_at +
                            ", but SLURM runs only the last assignment: " + hook.key + "=" +
                            QuoteForMessage(hook.value) + " at " + hook.where,
                        "remove the later " + hook.key + "= line at " + hook.where +
                            " (the Expanse wrapper already runs the site's hook first), or re-run "
                            "`expanse compute install --reinstall ...` to chain it; " +
                            reconfigure));
      continue;
    }
    out.push_back(ActionFinding(
        "HOOK_MISSING", "",
        hook.key + " does not run Expanse's wrapper: " +
            (hook.value.empty()
                 ? "no " + hook.key + "= line in " + conf.path
                 : hook.key + "=" + QuoteForMessage(hook.value) + " at " + hook.where),
        "re-run `expanse compute install --reinstall ...` (it wires " + hook.key +
            " and chains the site's hook), or wire it by hand as `expanse compute install "
            "--patch-slurm-conf=false` prints; " +
            reconfigure));
  }
  if (!ListHas(conf.task_plugin, "task/cgroup")) {
    out.push_back(
        ActionFinding("SLURM_TASK_CGROUP_OFF", "",
                      "TaskPlugin=" + QuoteForMessage(conf.task_plugin) + " in " + conf.path +
                          " has no task/cgroup: jobs get no device cgroup to attribute by",
                      "set TaskPlugin=task/cgroup (with task/affinity if used) in slurm.conf "
                      "and restart slurmd on every node"));
  }
  if (Lower(conf.proctrack_type) != "proctrack/cgroup") {
    out.push_back(
        ActionFinding("SLURM_PROCTRACK_NOT_CGROUP", "",
                      "ProctrackType=" + QuoteForMessage(conf.proctrack_type) + " in " + conf.path +
                          ": a job's processes are not held in its cgroup",
                      "set ProctrackType=proctrack/cgroup in slurm.conf and restart slurmd "
                      "on every node"));
  }
}

void CheckCgroupConf(const CgroupConfFacts& conf, std::vector<Finding>& out) {
  if (!conf.error.empty()) {
    out.push_back(
        ActionFinding("CGROUP_CONF_UNREADABLE", "", "cannot read " + conf.path + ": " + conf.error,
                      "make " + conf.path + " a readable regular file of SLURM's Key=Value lines"));
    return;
  }
  const auto it = conf.settings.find("constraindevices");
  const std::string value = it == conf.settings.end() ? "" : Lower(it->second);
  if (value != "yes") {
    out.push_back(ActionFinding(
        "CGROUP_CONSTRAIN_DEVICES_OFF", "",
        std::string(conf.present ? "ConstrainDevices=" + QuoteForMessage(value) + " in " + conf.path
                                 : conf.path + " does not exist") +
            ": a job's cgroup does not list its GPUs, so a process cannot be tied to the GPUs "
            "SLURM gave its job",
        "set ConstrainDevices=yes in " + conf.path + " and restart slurmd on every node"));
  }
}

bool AccountCanWrite(const DirFacts& dir, const AccountFacts& account) {
  if (!account.found)
    return false;
  if (account.uid == 0)
    return true;
  if (dir.uid == account.uid)
    return (dir.mode & 0300) == 0300;
  if (dir.gid == account.gid)
    return (dir.mode & 0030) == 0030;
  return (dir.mode & 0003) == 0003;
}

void CheckSpool(const SpoolFacts& spool, const AccountFacts& user, const CheckLimits& limits,
                std::vector<Finding>& out) {
  if (!user.found) {
    out.push_back(
        ActionFinding("DAEMON_USER_MISSING", "",
                      "the daemon's account " + QuoteForMessage(user.name) + " does not exist",
                      "create the account or re-run `expanse compute install --user NAME`"));
  }
  if (!spool.dir.exists || !spool.dir.is_directory) {
    out.push_back(
        ActionFinding("SPOOL_MISSING", "",
                      spool.root + (spool.dir.exists ? " is not a directory" : " does not exist"),
                      "re-run `expanse compute install --reinstall ...`, which creates it"));
    return;
  }
  std::vector<const DirFacts*> dirs = {&spool.dir};
  for (const DirFacts& d : spool.host_dirs)
    dirs.push_back(&d);
  for (const DirFacts* d : dirs) {
    if (!user.found || AccountCanWrite(*d, user))
      continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(d->mode));
    out.push_back(
        ActionFinding("SPOOL_NOT_WRITABLE", "",
                      d->path + " (mode " + mode + ", uid " + std::to_string(d->uid) +
                          ") cannot be written by the daemon user " + user.name +
                          ": workers cannot hand over their samples",
                      "chown " + user.name + " " + d->path + " && chmod 0755 " + d->path));
  }
  for (const auto& [host, files] : spool.backlog_files) {
    if (files <= limits.spool_backlog_max_files)
      continue;
    out.push_back(ActionFinding("SPOOL_BACKLOG", host,
                                std::to_string(files) + " spool files from " + host + " wait in " +
                                    spool.root + "/" + host +
                                    ": the controller is not draining them",
                                "check the controller: `systemctl status expanse-daemon` and "
                                "`journalctl -u expanse-daemon`"));
  }
  for (const std::string& dir : spool.capped_dirs) {
    out.push_back({"SPOOL_LISTING_CAPPED", Severity::kInfo, "",
                   dir + " holds more names than the doctor reads: only the first " +
                       "ones were counted, so the spool's counts are lower bounds",
                   "look at what fills it (`ls -f " + dir + " | head`)"});
  }
  if (spool.quarantined > 0) {
    out.push_back(ActionFinding("SPOOL_QUARANTINE", "",
                                std::to_string(spool.quarantined) + " refused entries in " +
                                    spool.root +
                                    "/.quarantine (files the controller could not trust)",
                                "look at their names (host-file-reason) with `ls " + spool.root +
                                    "/.quarantine`, fix the writer, then remove them"));
  }
}

void CheckCredential(const CredentialFacts& credential, std::vector<Finding>& out) {
  if (!credential.error.empty()) {
    out.push_back(ActionFinding("CREDENTIAL_CONFIG_UNREADABLE", "", credential.error,
                                "issue an install token on the compute's console page and run "
                                "`expanse compute install --reinstall ...` with it in "
                                "EXPANSE_INSTALL_TOKEN (the install's other flags as before)"));
    return;
  }
  const auto probe = [&](const std::optional<ProbeFacts>& p, const std::string& plane,
                         const std::string& unreachable_code) {
    if (!p)
      return;
    if (!p->reached) {
      out.push_back(ActionFinding(
          unreachable_code, "", "the " + plane + " at " + p->url + " did not answer: " + p->error,
          "check the network path from this host (proxy: HTTPS_PROXY in "
          "/etc/expanse/daemon.env; CA: SSL_CERT_FILE) and that expanse-server "
          "runs"));
      return;
    }
    if (p->status == 401 || p->status == 403) {
      const bool revoked = p->code == "credential_revoked";
      out.push_back(ActionFinding(
          revoked ? "CREDENTIAL_REVOKED" : "CREDENTIAL_REFUSED", "",
          "the " + plane + " refused this compute's credential (HTTP " + std::to_string(p->status) +
              (p->code.empty() ? "" : ", " + QuoteForMessage(p->code)) + ")",
          "issue an install token on the compute's console page and run "
          "`expanse compute install --reinstall ...` with it in "
          "EXPANSE_INSTALL_TOKEN; the daemon stops while its credential is "
          "refused"));
      return;
    }
    // Busy, not broken: the credential's rate limit (429) or a listener's full queue (503
    // overloaded) answers the daemon too at times, and it retries; worth knowing, not an error.
    if ((p->status == 429 && p->code == "rate_limited") ||
        (p->status == 503 && p->code == "overloaded")) {
      out.push_back({"PLANE_BUSY", Severity::kInfo, "",
                     "the " + plane + " at " + p->url + " is busy: HTTP " +
                         std::to_string(p->status) +
                         (p->code.empty() ? "" : " (" + QuoteForMessage(p->code) + ")") +
                         "; the daemon retries such answers",
                     ""});
      return;
    }
    // Both questions are answered 200 by expanse-server. Anything else (a redirect, a 404 from a
    // proxy or another site, a 4xx, a 5xx) is an answer the daemon cannot use either.
    if (p->status != 200) {
      const bool server_error = p->status >= 500;
      out.push_back(ActionFinding(
          "PLANE_ERROR", "",
          "the " + plane + " at " + p->url + " answered HTTP " + std::to_string(p->status) +
              (p->code.empty() ? "" : " (" + QuoteForMessage(p->code) + ")"),
          server_error ? "check expanse-server's log on the server"
                       : "check that the URL in the credential config leads to expanse-server "
                         "(not a proxy's or another site's page) and expanse-server's log; "
                         "`expanse compute install --reinstall ...` rewrites the URLs"));
    }
  };
  probe(credential.control_plane, "control plane", "CONTROL_PLANE_UNREACHABLE");
  // A revoked credential is one finding, not two.
  if (!out.empty() && out.back().code == "CREDENTIAL_REVOKED")
    return;
  probe(credential.data_plane, "data plane", "DATA_PLANE_UNREACHABLE");
}

void CheckDisks(const std::vector<DiskFacts>& disks, const std::optional<OutboxFacts>& outbox,
                const CheckLimits& limits, std::vector<Finding>& out) {
  for (const DiskFacts& disk : disks) {
    if (!disk.error.empty()) {
      out.push_back({"DISK_UNKNOWN", Severity::kInfo, "",
                     "free space of " + disk.path + " unknown: " + disk.error, ""});
      continue;
    }
    const bool low = disk.free_bytes < limits.disk_free_min_bytes ||
                     static_cast<double>(disk.free_bytes) <
                         limits.disk_free_min_fraction * static_cast<double>(disk.total_bytes);
    if (low) {
      out.push_back(ActionFinding(
          "DISK_LOW", "",
          disk.path + " has " + MiB(disk.free_bytes) + " free of " + MiB(disk.total_bytes),
          "free space on the file system holding " + disk.path));
    }
  }
  if (!outbox)
    return;
  if (!outbox->error.empty()) {
    out.push_back(
        {"OUTBOX_UNREADABLE", Severity::kInfo, "", outbox->dir + ": " + outbox->error, ""});
    return;
  }
  if (outbox->max_bytes > 0 &&
      static_cast<double>(outbox->depth_bytes) >=
          limits.outbox_full_fraction * static_cast<double>(outbox->max_bytes)) {
    out.push_back(ActionFinding(
        "OUTBOX_NEARLY_FULL", "",
        "the upload queue " + outbox->dir + " holds " + MiB(outbox->depth_bytes) + " of its " +
            MiB(outbox->max_bytes) + " bound: the oldest data is dropped next",
        "make the data plane reachable (see the other findings) so the "
        "queue drains; `journalctl -u expanse-daemon` names the upload error"));
  }
}

std::vector<Finding> RunChecks(const DeploymentFacts& facts, const CheckLimits& limits) {
  std::vector<Finding> out;
  if (facts.slurm_conf)
    CheckSlurmConf(*facts.slurm_conf, out);
  if (facts.cgroup_conf)
    CheckCgroupConf(*facts.cgroup_conf, out);
  if (facts.spool)
    CheckSpool(*facts.spool, facts.daemon_user, limits, out);
  if (facts.credential)
    CheckCredential(*facts.credential, out);
  CheckDisks(facts.disks, facts.outbox, limits, out);
  if (facts.node_names_capped && !(facts.spool && !facts.spool->capped_dirs.empty() &&
                                   facts.spool->capped_dirs.front() == facts.spool->root)) {
    out.push_back({"SPOOL_LISTING_CAPPED", Severity::kInfo, "",
                   "the spool's workers directory holds more names than the doctor reads: "
                   "only the first ones' reports were read",
                   ""});
  }
  if (!facts.report_times_error.empty()) {
    out.push_back({"REPORT_TIMES_INCOMPLETE", Severity::kInfo, "",
                   "when the health reports reached the shared file system is unknown for "
                   "some hosts (" +
                       facts.report_times_error +
                       "): their silence is judged by the time each worker wrote instead",
                   ""});
  }
  CheckUuids(facts.nodes, out);
  for (const NodeFacts& node : facts.nodes) {
    CheckNode(node, facts.now_ms, limits, out);
    CheckGres(node, out);
    CheckAttribution(node, out);
  }
  return out;
}

}  // namespace expanse::doctor
