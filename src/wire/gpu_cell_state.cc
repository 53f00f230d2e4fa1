#include "wire/gpu_cell_state.h"

namespace expanse::wire {

int NothingRunning(const GpuCellReadings& cell) {
  if (cell.processes == 0 || cell.job_processes == 0)
    return 1;
  if (cell.processes > 0 || cell.job_processes > 0)
    return 0;
  return -1;
}

bool Shared(const GpuCellReadings& cell) { return cell.allocated_jobs > 1; }

bool ActiveForJob(const GpuCellReadings& cell, const GpuCellThresholds& t) {
  return cell.samples > 0 && cell.util_max > t.idle_util_percent &&
         !(Shared(cell) && cell.job_processes == 0);
}

GpuCellState ClassifyGpuCell(const GpuCellReadings& cell, double peak_power_w,
                             const GpuCellThresholds& t) {
  const bool sampled = cell.samples > 0;
  const bool idle = sampled && cell.util_max <= t.idle_util_percent;
  const bool shared = Shared(cell);
  if (NothingRunning(cell) == 1 && (!sampled || idle || (shared && cell.job_processes == 0)))
    return GpuCellState::kNoProcess;
  if (!sampled)
    return GpuCellState::kUnknown;
  if (shared) {
    // Fine, not unknown: a sampled cell ends a run, so a stretch of sharing never joins two
    // spinning (or idle) stretches of the job alone into one.
    return cell.util_mean < t.underused_util_percent ? GpuCellState::kUnderused
                                                     : GpuCellState::kFine;
  }
  if (cell.util_mean >= t.busy_util_percent) {
    const bool spinning = cell.sm_active >= 0
                              ? cell.sm_active < t.spinning_sm_active
                              : cell.power_mean >= 0 && peak_power_w > 0 &&
                                    cell.power_mean < t.spinning_power_share * peak_power_w;
    return spinning ? GpuCellState::kSpinning : GpuCellState::kFine;
  }
  return cell.util_mean < t.underused_util_percent ? GpuCellState::kUnderused : GpuCellState::kFine;
}

}  // namespace expanse::wire
