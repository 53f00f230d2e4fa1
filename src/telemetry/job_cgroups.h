// JobCgroups: CPU and memory each SLURM job uses on this node, read from the job's cgroup
// (proctrack/task cgroup put every process of the job there), as the series
// `job.cpu_used_cores` and `job.mem_used_mib` with device "job/<id>" (docs/formats/metrics.md),
// plus `node.cpu_util` from /proc/stat. Under cgroup v2 with pressure stall information (PSI)
// also `job.io_pressure_some` and `job.io_pressure_full`: the share of each interval in which
// some (all) of the job's runnable tasks were stalled on I/O, from io.pressure's totals. v1 has
// no per-cgroup pressure, and a kernel without PSI has no io.pressure file: no such series.
// Under both, from the job's threads (telemetry/job_threads.h, read within a node-wide budget),
// `job.cpu_wait_cores` (cores' worth of time its threads waited for a CPU) and
// `job.uninterruptible_some` (whether some thread was in uninterruptible sleep, most often on
// I/O: what tells a job waiting on its files where v1 has no pressure).
//
// Where the job cgroups are: slurmd's cgroup plugin makes .../slurm/uid_<uid>/job_<id>/ (v1, in
// each controller's hierarchy, under a prefix that depends on how slurmd was started) or
// .../slurmstepd.scope/job_<id>/ (v2). Rather than guess the prefix, a bounded walk finds every
// directory named job_<digits> whose parent is uid_<digits> or slurmstepd.scope; the walk is
// repeated every `rescan_every` samples, when a known job directory disappears, and when the
// caller learns of a new job (RequestRescan, ExpectJob), but not on every sample of an idle node.
#ifndef EXPANSE_TELEMETRY_JOB_CGROUPS_H_
#define EXPANSE_TELEMETRY_JOB_CGROUPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/job_threads.h"
#include "telemetry/series_buffer.h"

namespace expanse::telemetry {

struct JobCgroupOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_stat = "/proc/stat";
  JobThreadOptions threads;   // job.cpu_wait_cores and job.uninterruptible_some
  size_t max_threads = 4096;  // thread ids of one job listed per sample
  int max_depth = 9;
  size_t max_directories = 20'000;  // the walk stops there (a huge unrelated tree)
  int rescan_every = 30;
};

class JobCgroups {
 public:
  explicit JobCgroups(JobCgroupOptions options = {})
      : options_(std::move(options)), threads_(options_.threads) {}

  // Reads every known job's CPU and memory and the node's CPU; adds what can be computed (CPU
  // needs two readings) to `buffer` for `host` at `now_ms`. Devices are "job/<SLURM_JOB_ID>";
  // the controller renames array tasks and het components to squeue's ids.
  void Sample(int64_t now_ms, const std::string& host, SeriesBuffer& buffer);

  // Job directories found by the last walk: job id -> its directory per hierarchy.
  struct JobDirs {
    std::string cpu;     // has cpuacct.usage (v1) or cpu.stat (v2)
    std::string memory;  // has memory.usage_in_bytes (v1) or memory.current (v2)
    // v1 only: has devices.list, the device whitelist ConstrainDevices=yes writes (v2 filters
    // devices with an eBPF program and has no such file).
    std::string devices;
    bool v2 = false;
  };
  const std::map<uint32_t, JobDirs>& jobs() const { return jobs_; }
  // The processes of `job`: cgroup.procs of its directory and of every directory below it (the
  // steps and tasks slurmstepd makes), at most `max_pids`, without duplicates; empty when the
  // job is unknown or gone.
  std::vector<int> Pids(uint32_t job, size_t max_pids = 1024) const;
  void Rescan();
  // Walk again at the next Sample (a job started on this node).
  void RequestRescan() { scanned_ = false; }
  // A job started on this node (its Prolog ran): walk at every Sample until its directory is
  // there with both CPU and memory, for at most `rescan_every` samples. slurmstepd may make the
  // directory, or enable its memory controller, after the Prolog ran; one walk at the next
  // Sample could miss it, and the periodic walk would then see a short job too late to read
  // its CPU twice.
  void ExpectJob(uint32_t job);

 private:
  struct Last {
    int64_t at_ms = 0;
    uint64_t cpu_ns = 0;
  };
  // io.pressure's "some" and "full" totals (µs) at the last reading.
  struct LastIo {
    int64_t at_ms = 0;
    uint64_t some_us = 0;
    uint64_t full_us = 0;
  };
  // The ids listed in `v1_file` (`v2_file` under v2) of the job's directory and of every
  // directory below it, at most `max_ids`, without duplicates.
  std::vector<int> Ids(uint32_t job, const char* v1_file, const char* v2_file,
                       size_t max_ids) const;
  void SampleIoPressure(uint32_t job, const std::string& dir, int64_t now_ms,
                        const std::string& host, SeriesBuffer& buffer,
                        std::map<uint32_t, LastIo>& next);
  JobCgroupOptions options_;
  std::map<uint32_t, JobDirs> jobs_;
  std::map<uint32_t, Last> last_;
  std::map<uint32_t, LastIo> last_io_;
  JobThreads threads_;
  // Jobs announced by ExpectJob and not yet found: job id -> samples left to look for it.
  std::map<uint32_t, int> expected_;
  int samples_since_scan_ = 0;
  bool scanned_ = false;
  std::optional<std::pair<uint64_t, uint64_t>> last_node_cpu_;  // busy, total jiffies
};

}  // namespace expanse::telemetry

#endif  // EXPANSE_TELEMETRY_JOB_CGROUPS_H_
