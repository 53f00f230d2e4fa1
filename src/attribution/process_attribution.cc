#include "attribution/process_attribution.h"

#include <map>
#include <utility>

#include "attribution/proc_cgroup.h"
#include "attribution/process_environ.h"

namespace expanse::attribution {
namespace {

// What the two files say about one pid: an AttributedProcess without its NVML part, which is
// filled per GPU. nullopt from ReadProcess when the process is gone.
using ProcessFacts = AttributedProcess;

bool IsGone(const Status& status) { return status.code() == StatusCode::kNotFound; }

std::optional<ProcessFacts> ReadProcess(uint32_t pid, const AttributionOptions& options,
                                        const FileReader& reader, AttributionCounters& counters) {
  const std::string dir = options.proc_root + "/" + std::to_string(pid);
  ProcessFacts facts;

  std::optional<CgroupPlacement> placement;
  bool cgroup_known = false;  // the cgroup file was read and understood
  Result<CappedFile> cgroup_file = reader.Read(dir + "/cgroup", options.max_cgroup_bytes);
  if (!cgroup_file.ok()) {
    if (IsGone(cgroup_file.status())) {
      return std::nullopt;
    }
    ++counters.cgroup_unreadable;
  } else if (Result<std::optional<CgroupPlacement>> parsed = ParseProcCgroup(cgroup_file->bytes);
             parsed.ok()) {
    placement = std::move(*parsed);
    cgroup_known = true;
  } else {
    ++counters.cgroup_malformed;
  }

  std::optional<SlurmEnviron> environ_vars;
  Result<CappedFile> environ_file = reader.Read(dir + "/environ", options.max_environ_bytes);
  if (!environ_file.ok()) {
    if (IsGone(environ_file.status())) {
      return std::nullopt;
    }
    if (environ_file.status().code() == StatusCode::kPermissionDenied) {
      ++counters.environ_denied;
    } else {
      ++counters.environ_unreadable;
    }
  } else {
    if (environ_file->truncated) {
      ++counters.environ_truncated;
    }
    Result<SlurmEnviron> parsed = ParseProcessEnviron(environ_file->bytes, environ_file->truncated);
    if (parsed.ok()) {
      environ_vars = std::move(*parsed);
      facts.cuda_visible_devices = environ_vars->cuda_visible_devices;
      facts.slurm_job_gpus = environ_vars->slurm_job_gpus;
      facts.cuda_tool = environ_vars->cuda_tool;
    } else {
      ++counters.environ_malformed;
    }
  }
  const std::optional<SlurmJob> environ_job =
      environ_vars ? environ_vars->job : std::optional<SlurmJob>();

  if (placement) {
    facts.source = JobSource::kCgroup;
    facts.step = placement->job.step;
    facts.job_cgroup = placement->job.job_cgroup;
    // The environment only adds the display name, and only when it names the same job.
    facts.job = environ_job && environ_job->job_id == placement->job.job_id
                    ? *environ_job
                    : JobFromNumber(placement->job.job_id);
  } else if (environ_job) {
    facts.source = JobSource::kEnviron;
    facts.job = environ_job;
    // Only a cgroup we could read and that names no job shows the process left it.
    facts.outside_cgroup = cgroup_known;
  }
  return facts;
}

}  // namespace

std::string_view JobSourceName(JobSource source) {
  switch (source) {
    case JobSource::kNone:
      return "none";
    case JobSource::kCgroup:
      return "cgroup";
    case JobSource::kEnviron:
      return "environ";
  }
  return "unknown";
}

ProcessAttributionResult AttributeProcesses(const std::vector<gpu::GpuProcess>& processes,
                                            const AttributionOptions& options) {
  const FileReader& reader = options.reader != nullptr ? *options.reader : SystemFileReader();
  ProcessAttributionResult result;
  std::map<uint32_t, std::optional<ProcessFacts>> by_pid;
  for (const gpu::GpuProcess& process : processes) {
    auto it = by_pid.find(process.pid);
    if (it == by_pid.end() && process.pid == 0) {
      // NVML reports pid 0 for a process in another pid namespace that it cannot name. It still
      // holds the GPU, so it stays, attributed to no job.
      it = by_pid.emplace(0, ProcessFacts{}).first;
    } else if (it == by_pid.end()) {
      it = by_pid.emplace(process.pid, ReadProcess(process.pid, options, reader, result.counters))
               .first;
      if (!it->second) {
        ++result.counters.processes_gone;
      }
    }
    if (!it->second) {
      continue;
    }
    AttributedProcess attributed = *it->second;
    attributed.process = process;
    result.processes.push_back(std::move(attributed));
  }
  return result;
}

}  // namespace expanse::attribution
