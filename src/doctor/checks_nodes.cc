// The per-node checks, from each worker's spool health report: report age and clock skew,
// capabilities, gres.conf against the GPUs the sampler sees, and the attribution self-check.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/quote.h"
#include "doctor/checks.h"

namespace expanse::doctor {
namespace {

std::string Seconds(int64_t ms) {
  const int64_t s = (ms < 0 ? -ms : ms) / 1000;
  if (s >= 120)
    return std::to_string(s / 60) + " min";
  return std::to_string(s) + " s";
}

std::string Join(const std::set<uint32_t>& minors) {
  std::string out;
  for (uint32_t m : minors)
    out += (out.empty() ? "" : ",") + std::to_string(m);
  return out.empty() ? "none" : out;
}

// The capability codes, one per collector, so monitoring can tell them apart.
struct CapabilityRule {
  const char* key;
  const char* code;
  const char* fix;
};
constexpr CapabilityRule kCapabilityRules[] = {
    {"nvml", "GPU_BACKEND_DEGRADED",
     "check the driver on the node (`nvidia-smi`); EXPANSE_NVML_LIBRARY in /etc/expanse/daemon.env "
     "names the library when it is not on the default path"},
    {"nvidia_smi", "GPU_BACKEND_DEGRADED", "check `nvidia-smi` on the node"},
    {"cupti", "CUPTI_DEGRADED",
     "run the node's helper (`<prefix>/lib/cupti-nodes/<host>/bin/expanse-cupti-helper probe "
     "--json`) as the service account and read pm_sampling_reason; "
     "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES needs CAP_PERFMON on the service (--cupti-mode "
     "perfmon, the default, with RmProfilingAdminOnly=1 kept), `expanse-cupti-helper not found` "
     "a signed CUPTI release for the node's driver; EXPANSE_CUPTI_ENABLE=0 turns counters off"},
    {"dcgm", "DCGM_DEGRADED",
     "make the DCGM host engine the site runs reachable (NVIDIA's unit is nvidia-dcgm; Expanse "
     "never starts it), or point EXPANSE_DCGM_HOST and EXPANSE_DCGMI in "
     "/etc/expanse/daemon.env at it; baseline GPU metrics do not need it"},
    {"py_stacks", "PYSTACKS_DEGRADED",
     "check ptrace permission (kernel.yama.ptrace_scope) on the node, or set "
     "EXPANSE_PYSTACKS_ENABLE=0 in /etc/expanse/daemon.env"},
    {"profiling_permissions", "PROFILING_PERMISSIONS_DEGRADED",
     "inspect the named path as the daemon account: directories the daemon owns are repaired on "
     "their own, while the shared-prefix root and site-owned ancestors need o+x restored by your "
     "configuration management (not a recursive chmod); EXPANSE_PROFILING_AGENT_ENABLE=0 when "
     "in-process capture is not wanted"},
};

// "[GPU-a, GPU-b]", each quoted as a message needs it; "none" when empty.
std::string UuidList(const std::vector<std::string>& uuids) {
  if (uuids.empty())
    return "none";
  std::string out = "[";
  for (const std::string& uuid : uuids)
    out += (out.size() > 1 ? ", " : "") + QuoteForMessage(uuid);
  return out + "]";
}

std::vector<std::string> Minus(std::vector<std::string> a, std::vector<std::string> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// The cgroup side of the self-check: each running job's device whitelist against the GPUs its
// Prolog recorded; and one note per node saying what was checked, so a clean result is seen
// to have been looked at.
void CheckJobDevices(const NodeFacts& node, std::vector<Finding>& out) {
  const std::string& host = node.host;
  size_t agree = 0;
  std::map<std::string, size_t> not_checked;  // why -> jobs
  for (const JobDevicesFacts& job : node.job_devices) {
    const std::string name = "job " + QuoteForMessage(job.job_id);
    if (job.state == "agrees") {
      ++agree;
    } else if (job.state == "disagrees") {
      const std::vector<std::string> extra = Minus(job.cgroup_gpus, job.allocated_gpus);
      const std::vector<std::string> missing = Minus(job.allocated_gpus, job.cgroup_gpus);
      std::string seen = name + "'s cgroup device list lets it open " + UuidList(job.cgroup_gpus) +
                         " but SLURM allocated it " + UuidList(job.allocated_gpus) + " (";
      if (!extra.empty())
        seen += "not allocated: " + UuidList(extra);
      if (!missing.empty())
        seen += std::string(extra.empty() ? "" : "; ") + "not allowed: " + UuidList(missing);
      out.push_back(ActionFinding(
          "ATTRIBUTION_CGROUP_DEVICES", host,
          seen + "; devices.list vs SLURM_JOB_GPUS/CUDA_VISIBLE_DEVICES)",
          "compare gres.conf's File= lines for " + host +
              " with the GPUs' minors (`ls -l /dev/nvidia*`, `nvidia-smi -q | grep Minor`) and "
              "fix them, then `scontrol reconfigure`; a device written into a job's "
              "devices.allow by hand also shows here"));
    } else if (job.state == "unconstrained") {
      out.push_back(
          ActionFinding("ATTRIBUTION_DEVICES_UNCONSTRAINED", host,
                        name + "'s cgroup lets it open every GPU of " + host +
                            " (its devices.list grants all NVIDIA devices); SLURM allocated "
                            "it " +
                            UuidList(job.allocated_gpus),
                        "set ConstrainDevices=yes in cgroup.conf and restart slurmd on " + host +
                            " (jobs started before keep their cgroup)"));
    } else if (job.state == "unreadable") {
      out.push_back(Finding{"ATTRIBUTION_DEVICES_UNREADABLE", Severity::kInfo, host,
                            name + "'s cgroup device list could not be used: " + job.detail,
                            "the other two sources (SLURM_JOB_GPUS/CUDA_VISIBLE_DEVICES and "
                            "NVML's processes) are still compared"});
    } else {
      ++not_checked[job.detail.empty() ? std::string("no reason given") : job.detail];
    }
  }
  if (node.job_devices.empty())
    return;
  std::string seen = host + ": the GPUs of " + std::to_string(node.job_devices.size()) +
                     " running job" + (node.job_devices.size() == 1 ? "" : "s") +
                     " checked against their cgroup device lists: " + std::to_string(agree) +
                     " agree";
  for (const auto& [why, count] : not_checked)
    seen += "; " + std::to_string(count) + " not checked (" + why + ")";
  out.push_back(Finding{"ATTRIBUTION_SELF_CHECK", Severity::kInfo, host, seen, ""});
}

}  // namespace

void CheckNode(const NodeFacts& node, int64_t now_ms, const CheckLimits& limits,
               std::vector<Finding>& out) {
  const std::string& host = node.host;
  const std::string restart_sampler = node.controller
                                          ? "`systemctl restart expanse-daemon` on the controller"
                                          : "`systemctl restart expanse-sampler` on " + host +
                                                " (or run a job there: the Prolog starts it)";
  if (!node.error.empty()) {
    out.push_back(ActionFinding("WORKER_REPORT_UNREADABLE", host,
                                "the health report of " + host + " cannot be used: " + node.error,
                                restart_sampler + "; it rewrites the report within a minute"));
    return;
  }
  // The file's mtime is the shared file system's clock; the report's own time is the worker's.
  // Age is measured on the first, skew between the two; without an mtime, on the report alone.
  const int64_t arrived = node.arrived_ms.value_or(node.written_ms);
  const int64_t age = now_ms - arrived;
  if (age > limits.report_max_age_ms) {
    out.push_back(
        ActionFinding("WORKER_SILENT", host, host + " last reported " + Seconds(age) + " ago",
                      restart_sampler + "; `journalctl -u expanse-sampler` there says why "
                                        "it stopped"));
  } else if (node.last_sample_ms == 0 ||
             node.written_ms - node.last_sample_ms > limits.sample_max_age_ms) {
    out.push_back(ActionFinding(
        "WORKER_NOT_SAMPLING", host,
        host + " reports but has " +
            (node.last_sample_ms == 0
                 ? std::string("no GPU sample yet")
                 : "no GPU sample for " + Seconds(node.written_ms - node.last_sample_ms)),
        "see the GPU backend finding of this node, or `expanse-daemon gpus` "
        "on it"));
  }
  if (node.arrived_ms) {
    const int64_t skew = node.written_ms - *node.arrived_ms;
    if (skew > limits.clock_skew_max_ms || -skew > limits.clock_skew_max_ms) {
      out.push_back(ActionFinding(
          "WORKER_CLOCK_SKEW", host,
          host + "'s clock is " + Seconds(skew) + (skew > 0 ? " ahead of" : " behind") +
              " the shared file system's",
          "synchronise the clock on " + host + " (`timedatectl set-ntp true`, or chrony/ntpd)"));
    }
  }
  if (!node.problem.empty()) {
    out.push_back(ActionFinding(
        "WORKER_PROBLEM", host,
        "the sampler on " + host + " says " + QuoteForMessage(node.problem, 200), restart_sampler));
  }
  if (node.spool_write_errors > 0 || node.spool_records_dropped > 0) {
    out.push_back(ActionFinding("WORKER_SPOOL_ERRORS", host,
                                host + " failed " + std::to_string(node.spool_write_errors) +
                                    " spool writes and dropped " +
                                    std::to_string(node.spool_records_dropped) + " records",
                                "check the shared prefix's spool is mounted and writable on " +
                                    host + " by the daemon user, and has free space"));
  }
  for (const auto& [key, capability] : node.capabilities) {
    const CapabilityRule* rule = nullptr;
    for (const CapabilityRule& r : kCapabilityRules) {
      if (key == r.key)
        rule = &r;
    }
    if (rule == nullptr)
      continue;  // a newer daemon's capability: not ours to judge
    const std::string reason = QuoteForMessage(capability.reason, 200);
    if (capability.state == "degraded") {
      out.push_back(ActionFinding(rule->code, host, key + " is degraded on " + host + ": " + reason,
                                  rule->fix));
    } else if (rule->code == std::string_view("GPU_BACKEND_DEGRADED") &&
               capability.state == "absent") {
      continue;  // the other GPU backend is the one in use: nothing to note
    } else if (capability.state == "absent" || capability.state == "disabled") {
      out.push_back({"CAPABILITY_OFF", Severity::kInfo, host,
                     key + " is " + capability.state + " on " + host + ": " + reason, ""});
    }
  }
}

void CheckGres(const NodeFacts& node, std::vector<Finding>& out) {
  if (!node.gres || !node.error.empty() || node.gpus.empty())
    return;
  const GresFacts& gres = *node.gres;
  const std::string& host = node.host;
  if (!gres.error.empty()) {
    out.push_back(ActionFinding("GRES_CONF_UNREADABLE", host,
                                "gres.conf for " + host + " cannot be used: " + gres.error,
                                "fix the line gres.conf names, then `scontrol reconfigure`"));
    return;
  }
  if (gres.auto_detect)
    return;  // slurmd asks NVML itself: nothing written to disagree with
  const size_t configured = gres.minors.size() + gres.gpus_without_file;
  if (configured != node.gpus.size()) {
    out.push_back(
        ActionFinding("GRES_GPU_COUNT_MISMATCH", host,
                      "gres.conf gives " + host + " " + std::to_string(configured) +
                          " GPUs; the sampler sees " + std::to_string(node.gpus.size()),
                      "make the node's Name=gpu File= lines in gres.conf list exactly its "
                      "/dev/nvidiaN devices (and Gres=gpu:N in slurm.conf), or use "
                      "AutoDetect=nvml; then `scontrol reconfigure`"));
  }
  std::set<uint32_t> configured_minors(gres.minors.begin(), gres.minors.end());
  std::set<uint32_t> seen_minors;
  for (const GpuFacts& gpu : node.gpus) {
    if (gpu.minor)
      seen_minors.insert(*gpu.minor);
  }
  if (seen_minors.empty() || gres.minors.empty())
    return;
  std::set<uint32_t> only_conf, only_seen;
  std::set_difference(configured_minors.begin(), configured_minors.end(), seen_minors.begin(),
                      seen_minors.end(), std::inserter(only_conf, only_conf.end()));
  std::set_difference(seen_minors.begin(), seen_minors.end(), configured_minors.begin(),
                      configured_minors.end(), std::inserter(only_seen, only_seen.end()));
  if (!only_conf.empty() || !only_seen.empty()) {
    out.push_back(ActionFinding(
        "GRES_MINOR_MISMATCH", host,
        "gres.conf names /dev/nvidia minors " + Join(configured_minors) + " for " + host +
            "; the sampler sees " + Join(seen_minors) + " (only in gres.conf: " + Join(only_conf) +
            "; only on the node: " + Join(only_seen) + "): jobs would be told the wrong GPUs",
        "correct File=/dev/nvidia[...] on " + host +
            "'s gres.conf line to the minors the node has, then `scontrol "
            "reconfigure`"));
  }
}

void CheckAttribution(const NodeFacts& node, std::vector<Finding>& out) {
  if (!node.error.empty())
    return;
  const std::string& host = node.host;
  for (const GpuUseFacts& gpu : node.gpu_use) {
    for (const GpuProcessFacts& p : gpu.processes) {
      const std::string pid = "pid " + std::to_string(p.pid);
      const std::string allocated =
          gpu.jobs.empty() ? std::string("no job") : "job " + QuoteForMessage(gpu.jobs.front());
      if (p.job_id.empty()) {
        // Not a disagreement between sources (a monitoring process may hold a context), but
        // GPU use SLURM does not know of: worth a note, not an alarm.
        out.push_back(Finding{
            "ATTRIBUTION_UNATTRIBUTED_PROCESS", Severity::kInfo, host,
            pid + " runs on GPU " + QuoteForMessage(gpu.uuid) +
                " (NVML) but belongs to no "
                "job's cgroup; SLURM allocated the GPU to " +
                allocated,
            "find it with `ps -o pid,user,cmd -p " + std::to_string(p.pid) + "` on " + host +
                "; GPUs outside SLURM's control defeat attribution (ConstrainDevices=yes "
                "keeps jobs off GPUs they were not given)"});
        continue;
      }
      if (p.outside_cgroup) {
        out.push_back(ActionFinding(
            "ATTRIBUTION_DISAGREEMENT", host,
            pid + " of job " + QuoteForMessage(p.job_id) + " runs on GPU " +
                QuoteForMessage(gpu.uuid) + " but has left the job's cgroup (cgroup vs NVML)",
            "check the job's launcher (a daemonised child escapes the cgroup); "
            "ProctrackType=proctrack/cgroup keeps processes in it"));
      } else if (!p.of_allocated_job) {
        out.push_back(ActionFinding(
            "ATTRIBUTION_DISAGREEMENT", host,
            pid + " of job " + QuoteForMessage(p.job_id) + " runs on GPU " +
                QuoteForMessage(gpu.uuid) + ", which SLURM allocated to " + allocated +
                " (SLURM_JOB_GPUS/CUDA_VISIBLE_DEVICES vs NVML)",
            "set ConstrainDevices=yes in cgroup.conf so a job sees only its GPUs, and check "
            "gres.conf's File= order on " +
                host));
      }
    }
  }
  CheckJobDevices(node, out);
}

void CheckUuids(const std::vector<NodeFacts>& nodes, std::vector<Finding>& out) {
  std::map<std::string, std::string> first_host;
  for (const NodeFacts& node : nodes) {
    for (const GpuFacts& gpu : node.gpus) {
      if (gpu.uuid.empty()) {
        out.push_back(ActionFinding("GPU_UUID_MISSING", node.host,
                                    "a GPU on " + node.host +
                                        " has no UUID: its data cannot be kept "
                                        "apart from other GPUs'",
                                    "update the NVIDIA driver on " + node.host));
        continue;
      }
      auto [it, inserted] = first_host.emplace(gpu.uuid, node.host);
      if (!inserted && it->second != node.host) {
        out.push_back(ActionFinding("GPU_UUID_DUPLICATE", node.host,
                                    "GPU " + QuoteForMessage(gpu.uuid) + " is reported by both " +
                                        it->second + " and " + node.host,
                                    "two nodes report under one identity: check --hostname of the "
                                    "samplers and that no node image was cloned with a stale state "
                                    "directory (/var/lib/expanse)"));
      }
    }
  }
}

}  // namespace expanse::doctor
