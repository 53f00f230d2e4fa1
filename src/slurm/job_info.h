// What the SLURM adapters report about a job: one JobInfo per squeue or sacct record, and the GPU
// indices scontrol shows per host. The fields follow store::JobRecord and the "jobs" section of
// docs/formats/ingest-batch.md, so the daemon copies them over and adds compute_id and
// observed_ms.
#ifndef EXPANSE_SLURM_JOB_INFO_H_
#define EXPANSE_SLURM_JOB_INFO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace expanse::slurm {

// Host name -> the indices of the GPUs the job holds there, ascending and without duplicates.
// These are SLURM's GRES indices, i.e. the order of the GPUs in gres.conf (usually the NVML
// index order), not /dev/nvidiaN minor numbers.
using GpuIndicesByHost = std::map<std::string, std::vector<int>>;

struct JobInfo {
  // SLURM's id as text: "123"; array tasks "123_4"; the not yet started tasks of an array, which
  // SLURM keeps as one record, "123_[5-9]"; heterogeneous job components "123+1".
  std::string job_id;
  // The number SLURM gave this record. Every array task and het component has its own
  // (array task 123_4 may be job 130), so it tells apart records that share a display id.
  int64_t slurm_job_id = 0;
  std::string name;
  std::string user;
  std::string account;
  std::string partition;
  // SLURM's state: PENDING, RUNNING, SUSPENDED, COMPLETING, COMPLETED, CANCELLED, FAILED,
  // TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, ...
  std::string state;
  std::string nodes;  // SLURM host list expression, e.g. "gpu[01-04]"; empty while pending
  // Unix ms; 0 when unknown. start_ms is 0 while the job waits (SLURM's start time is then only
  // an estimate), end_ms is 0 until the job has ended (before, it is the time limit's end).
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  // Requested resources, totals over the whole job; 0 when SLURM does not say.
  int64_t req_nodes = 0;
  int64_t req_cpus = 0;
  int64_t req_gpus = 0;
  int64_t req_mem_mib = 0;
  int64_t time_limit_s = 0;  // 0 = unlimited or unknown
  // The GPUs allocated per host, where the output says (squeue's gres_detail); empty otherwise.
  GpuIndicesByHost gpu_indices;

  friend bool operator==(const JobInfo&, const JobInfo&) = default;
};

// One record of `scontrol show job -d`: the GPUs a job was given on each of its hosts.
struct JobGres {
  std::string job_id;  // as JobInfo::job_id
  int64_t slurm_job_id = 0;
  std::string state;
  GpuIndicesByHost gpu_indices;  // hosts without GPUs are left out

  friend bool operator==(const JobGres&, const JobGres&) = default;
};

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_JOB_INFO_H_
