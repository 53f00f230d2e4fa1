// What one GPU was doing over a stretch of time (a "cell"), from its NVML series and counters:
// the one rule the server's verdicts (server/verdict_rules.h) and the controller's live
// detection (agent/live_detector.h) share, so a job the controller flags as stuck while it runs
// is one the verdicts later call stuck (docs/formats/verdicts.md, "The grid"). Pure. It lives
// in wire because the server and the daemon both link it and neither may link the other.
#ifndef EXPANSE_WIRE_GPU_CELL_STATE_H_
#define EXPANSE_WIRE_GPU_CELL_STATE_H_

#include <cstdint>

namespace expanse::wire {

struct GpuCellThresholds {
  double idle_util_percent = 1.0;        // idle when utilisation peaks at or below
  double underused_util_percent = 30.0;  // underused when its mean is below
  double busy_util_percent = 90.0;       // "busy" (a kernel always resident) at or above
  double spinning_sm_active = 0.05;      // busy with SM activity below this: kernels that wait
  // Without counters, a busy GPU drawing less than this share of its own peak power in the job
  // is spinning: a hung collective keeps utilisation at 100 % near idle power (an H100 idles at
  // about a tenth of its peak), while memory-bound work still draws a third or more.
  double spinning_power_share = 0.25;
};

// One GPU over one cell; negative values are unknown (no sample).
struct GpuCellReadings {
  uint32_t samples = 0;  // gpu.sm_util samples
  double util_mean = 0;
  double util_max = 0;
  double power_mean = -1;     // gpu.power_w
  double sm_active = -1;      // CUPTI's gpu.sm_active, else DCGM's gpu.dcgm.sm_active
  double processes = -1;      // peak of gpu.processes: every process on the GPU
  double job_processes = -1;  // peak of job.gpu_processes: the job's processes on GPUs, its host
  // Peak of gpu.allocated_jobs: the jobs SLURM had given the GPU to (several with gres/shard
  // or MPS), -1 when not reported (a daemon older than the series).
  double allocated_jobs = -1;
};

// Most telling first: nothing of the job running beats spinning, which beats underused.
enum class GpuCellState { kUnknown, kFine, kNoProcess, kSpinning, kUnderused };

// Whether nothing of the job ran on the GPU: no process at all on it, or none of the job's on
// its host; false/true when known, -1 when neither count was reported.
int NothingRunning(const GpuCellReadings& cell);

// Whether SLURM had given the GPU to other jobs too: its utilisation and power are then theirs
// as much as this job's.
bool Shared(const GpuCellReadings& cell);

// Whether the job kept the GPU busy in the cell: sampled, utilisation above idle, and not a
// shared GPU on which none of the job's processes ran (the activity was a neighbour's).
bool ActiveForJob(const GpuCellReadings& cell, const GpuCellThresholds& t);

// The cell's state. `peak_power_w` is the GPU's highest power_mean over the job so far (or the
// whole job), the reference for "near idle power" without counters; <= 0 when unknown.
//  - no process: nothing of the job running (above) and the GPU idle or unsampled, or a
//    shared GPU with none of the job's processes (busy with a neighbour's);
//  - on a shared GPU the readings are an upper bound of the job's part: underused when the
//    whole GPU was, otherwise fine (whose kernels kept it busy, or spun, cannot be told);
//  - spinning: utilisation mean >= busy and SM activity < spinning_sm_active, or, without
//    counters, power below spinning_power_share of the peak;
//  - underused: utilisation mean < underused;
//  - unknown: not sampled (and not known to be without processes); fine otherwise.
GpuCellState ClassifyGpuCell(const GpuCellReadings& cell, double peak_power_w,
                             const GpuCellThresholds& t);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_GPU_CELL_STATE_H_
