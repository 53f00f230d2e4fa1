// Why a job's GPUs were not doing useful work: verdicts over intervals, each with its evidence
// (codes and rules: docs/formats/verdicts.md). Pure: the caller gathers a job's series onto a
// grid of cells (verdict_evidence.h) and its stacks; nothing here reads a store or a clock.
//
// Two stages. ComputeSeriesVerdicts reads the per-cell series and gives the verdicts that need
// only NVML, cgroups and counters (no_process, stuck, communication_wait from counters,
// host_bound, over_allocated, memory_oversized, cpu_only) and the intervals where the GPUs were
// underused for a reason the series cannot tell. ExplainUnderused then reads the job's stacks
// of such an interval: mostly in data loading is input_bound, in collectives
// communication_wait, in device synchronisation sync_bound; else, with the job's tasks
// stalled on I/O (cgroup v2 pressure, else the sampled share of time some thread of the job
// was in uninterruptible sleep), io_wait; else, with the job's CPUs saturated, host_bound.
#ifndef EXPANSE_SERVER_VERDICT_RULES_H_
#define EXPANSE_SERVER_VERDICT_RULES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/frame_classes.h"
#include "store/job_store.h"
#include "wire/gpu_cell_state.h"

namespace expanse::server {

// The per-cell thresholds default to the rule the controller's live detection shares
// (wire/gpu_cell_state.h, which says why each value).
struct VerdictThresholds {
  double idle_util_percent = wire::GpuCellThresholds{}.idle_util_percent;
  double underused_util_percent = wire::GpuCellThresholds{}.underused_util_percent;
  double busy_util_percent = wire::GpuCellThresholds{}.busy_util_percent;
  double spinning_sm_active = wire::GpuCellThresholds{}.spinning_sm_active;
  double spinning_power_share = wire::GpuCellThresholds{}.spinning_power_share;
  double cpu_saturated_share = 0.9;  // cores used of cores allocated on the host
  // The share of time some task of the job was stalled on I/O (job.io_pressure_some) from
  // which an underused interval is io_wait.
  double io_pressure_share = 0.3;
  // The same from job.uninterruptible_some (where pressure does not cover the interval): higher,
  // since a thread in state D at a sample is a wider net than a task stalled on I/O.
  double uninterruptible_share = 0.5;
  double stack_share = 0.3;  // a stack class explains an interval from this share on
  double memory_oversized_share = 0.25;
  // A job that never touched its GPUs but used (or waited for) this much CPU.
  double cpu_only_cores = 0.5;
  int64_t min_interval_ms = 60'000;  // no interval verdict shorter than this
  int64_t stuck_after_ms = 600'000;  // spinning this long is stuck, shorter communication_wait
};

// One GPU over one cell of the job's grid; negative values are unknown (no sample).
struct GpuCell {
  uint32_t samples = 0;  // gpu.sm_util samples
  double util_mean = 0;
  double util_max = 0;
  double power_mean = -1;
  double mem_max_mib = -1;
  double sm_active = -1;       // CUPTI's gpu.sm_active, else DCGM's
  double processes = -1;       // peak of gpu.processes
  double allocated_jobs = -1;  // peak of gpu.allocated_jobs: > 1 when SLURM shared the GPU
};

struct GpuTrack {
  std::string host;
  std::string uuid;
  std::string model;             // "NVIDIA H200", "" when unknown
  double memory_total_mib = -1;  // from the compute's inventory
  // The allocation on the grid: cells [first_cell, end_cell).
  size_t first_cell = 0;
  size_t end_cell = 0;
  std::vector<GpuCell> cells;  // one per cell of the grid
};

struct HostTrack {
  std::string host;
  double cores_allocated = -1;        // the job's CPUs on this host
  std::vector<double> cpu_cores;      // job.cpu_used_cores mean per cell
  std::vector<double> cpu_wait;       // job.cpu_wait_cores mean per cell (empty: none)
  std::vector<double> gpu_processes;  // job.gpu_processes peak per cell
  std::vector<double> io_some;        // job.io_pressure_some mean per cell (empty: none)
  // job.uninterruptible_some mean per cell (empty: none): read where io_some covers less than
  // half an interval.
  std::vector<double> uninterruptible;
};

struct JobCells {
  int64_t start_ms = 0;  // the grid's start: cell i is [start + i*cell, start + (i+1)*cell)
  int64_t cell_ms = 60'000;
  size_t cells = 0;
  int64_t end_ms = 0;  // the job's end (or now): the last cell is cut there
  bool running = false;
  int64_t requested_gpus = 0;
  std::vector<GpuTrack> gpus;
  std::vector<HostTrack> hosts;
};

struct Verdict {
  std::string code;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  double confidence = 0;          // 0..1
  std::vector<std::string> gpus;  // UUIDs it concerns
  std::vector<std::string> hosts;
  nlohmann::json evidence;  // the figures and excerpts it rests on; never empty
  std::string suggestion;   // what the user can do about it
};

// An interval where some GPUs were underused and the series alone cannot say why.
struct Underused {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::vector<std::string> gpus;
  std::vector<std::string> hosts;
  bool cpu_saturated = false;  // the job's CPUs on those hosts were saturated throughout
  bool io_stalled = false;     // the job's tasks on those hosts stalled on I/O (mean share)
  nlohmann::json evidence;
};

struct SeriesVerdicts {
  std::vector<Verdict> verdicts;
  std::vector<Underused> underused;
};

SeriesVerdicts ComputeSeriesVerdicts(const JobCells& job, const VerdictThresholds& t);

// The verdict for an underused interval from the job's stacks of that interval (top stacks by
// samples, as store::JobStore::JobStacks gives them), else io_wait from the job's I/O
// pressure (or its threads' sampled uninterruptible sleep), else host_bound from saturated CPUs;
// nullopt when none explains it.
std::optional<Verdict> ExplainUnderused(const Underused& interval,
                                        const std::vector<store::StackTotal>& stacks,
                                        const VerdictThresholds& t);

// The smallest MIG profile of `model` with at least `needed_mib` of memory ("1g.18gb"), or ""
// when the model has no MIG profiles this build knows or none is big enough.
std::string SmallestMigProfile(const std::string& model, double needed_mib);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_VERDICT_RULES_H_
