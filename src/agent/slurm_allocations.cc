#include "agent/slurm_allocations.h"

#include "attribution/allocation.h"
#include "attribution/gres_conf.h"

namespace expanse::agent {

namespace {

std::string Key(const std::string& host, const std::string& job) { return host + "/" + job; }

bool IsRunning(const slurm::JobInfo& job) {
  return job.state == "RUNNING" || job.state == "SUSPENDED" || job.state == "COMPLETING";
}

}  // namespace

void SlurmAllocationFallback::NoteHookAllocations(
    const std::vector<wire::GpuAllocationRecord>& allocations) {
  for (const wire::GpuAllocationRecord& a : allocations) {
    if (hooked_.size() > 200'000)
      hooked_.clear();  // bounded; a forgotten key costs at most one redundant allocation
    hooked_.insert(Key(a.host, a.job_id));
  }
}

std::vector<wire::GpuAllocationRecord> SlurmAllocationFallback::Reconcile(
    const std::vector<slurm::JobInfo>& jobs,
    const std::map<std::string, std::vector<gpu::GpuInfo>>& inventories, int64_t now_ms,
    std::vector<std::string>* problems) {
  std::vector<wire::GpuAllocationRecord> out;
  std::set<std::string> running;
  for (const slurm::JobInfo& job : jobs) {
    if (!IsRunning(job) || job.start_ms <= 0)
      continue;
    for (const auto& [host, indices] : job.gpu_indices) {
      const std::string key = Key(host, job.job_id);
      running.insert(key);
      if (indices.empty() || hooked_.count(key) || opened_.count(key))
        continue;
      if (job.start_ms >= started_ms_ && now_ms - job.start_ms < kHookGraceMs)
        continue;
      auto inventory = inventories.find(host);
      if (inventory == inventories.end() || inventory->second.empty())
        continue;

      attribution::NodeGpus node;
      node.inventory = inventory->second;
      if (!gres_conf_.empty()) {
        Result<attribution::NodeGres> gres = attribution::ParseGresConf(gres_conf_, host);
        if (!gres.ok()) {
          Problem(key, "gres.conf for " + host + ": " + gres.status().message(), problems);
          continue;
        }
        node.gres = std::move(*gres);
      }
      attribution::AllocationEvidence evidence;
      evidence.job.display_id = job.job_id;
      evidence.job.job_id = static_cast<uint32_t>(job.slurm_job_id);
      std::string list;
      for (int index : indices)
        list += (list.empty() ? "" : ",") + std::to_string(index);
      evidence.slurm_job_gpus = list;  // squeue's IDX list means what the Prolog's variable does
      Result<attribution::ResolvedAllocation> resolved =
          attribution::ResolveAllocation(evidence, node);
      if (!resolved.ok()) {
        Problem(key,
                "squeue's GPUs of job " + job.job_id + " on " + host + ": " +
                    resolved.status().message(),
                problems);
        continue;
      }
      failed_.erase(key);
      std::vector<wire::GpuAllocationRecord> entries;
      for (const std::string& uuid : resolved->allocation.gpu_uuids) {
        for (const gpu::GpuInfo& g : node.inventory) {
          if (g.uuid != uuid)
            continue;
          entries.push_back({.job_id = job.job_id,
                             .host = host,
                             .gpu_uuid = g.uuid,
                             .gpu_index = g.index,
                             .gpu_minor = g.minor ? static_cast<int64_t>(*g.minor) : -1,
                             .from_ms = job.start_ms,
                             .to_ms = 0,
                             // An array task's or het component's own number: what its cgroups
                             // and the nodes' burst inbox go by (docs/formats/stack-burst.md).
                             .slurm_job_id = job.slurm_job_id});
        }
      }
      for (const auto& e : entries)
        out.push_back(e);
      opened_[key] = std::move(entries);
    }
  }
  // Close what we opened for jobs no longer running (ended, or gone from squeue), at the end
  // SLURM recorded when it says, else now.
  std::map<std::string, int64_t> ended_ms;
  for (const slurm::JobInfo& job : jobs) {
    if (!IsRunning(job) && job.end_ms > 0)
      ended_ms[job.job_id] = job.end_ms;
  }
  for (auto it = opened_.begin(); it != opened_.end();) {
    if (running.count(it->first)) {
      ++it;
      continue;
    }
    for (wire::GpuAllocationRecord e : it->second) {
      auto ended = ended_ms.find(e.job_id);
      e.to_ms = ended != ended_ms.end() ? ended->second : now_ms;
      out.push_back(std::move(e));
    }
    hooked_.erase(it->first);
    it = opened_.erase(it);
  }
  std::erase_if(failed_, [&](const auto& entry) { return !running.count(entry.first); });
  return out;
}

void SlurmAllocationFallback::Problem(const std::string& key, std::string message,
                                      std::vector<std::string>* problems) {
  // Once per job and host until the problem changes: it is tried again every round (gres.conf
  // may be fixed), and one line per round and job would be ~8,600 a day each.
  std::string& last = failed_[key];
  if (last == message)
    return;
  last = message;
  problems->push_back(std::move(message));
}

}  // namespace expanse::agent
