#include "wire/gpu_cell_state.h"

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

GpuCellReadings Busy(double power, double sm_active = -1) {
  return {.samples = 10,
          .util_mean = 100,
          .util_max = 100,
          .power_mean = power,
          .sm_active = sm_active,
          .processes = 1,
          .job_processes = 1};
}

TEST(GpuCellState, BusyNearIdlePowerIsSpinningWithoutCounters) {
  const GpuCellThresholds t;
  EXPECT_EQ(ClassifyGpuCell(Busy(90), 600, t), GpuCellState::kSpinning);
  EXPECT_EQ(ClassifyGpuCell(Busy(400), 600, t), GpuCellState::kFine);
  // No reference peak yet: nothing can be said to be near idle.
  EXPECT_EQ(ClassifyGpuCell(Busy(90), 0, t), GpuCellState::kFine);
}

TEST(GpuCellState, CountersDecideOverPower) {
  const GpuCellThresholds t;
  EXPECT_EQ(ClassifyGpuCell(Busy(90, 0.6), 600, t), GpuCellState::kFine);
  EXPECT_EQ(ClassifyGpuCell(Busy(500, 0.01), 600, t), GpuCellState::kSpinning);
}

TEST(GpuCellState, NoProcessNeedsAnIdleOrUnsampledGpu) {
  const GpuCellThresholds t;
  GpuCellReadings idle{.samples = 5, .util_mean = 0, .util_max = 0, .processes = 0};
  EXPECT_EQ(ClassifyGpuCell(idle, 600, t), GpuCellState::kNoProcess);
  GpuCellReadings unsampled{.job_processes = 0};
  EXPECT_EQ(ClassifyGpuCell(unsampled, 600, t), GpuCellState::kNoProcess);
  GpuCellReadings busy_other = Busy(500);
  busy_other.job_processes = 0;  // another job's process keeps the GPU busy
  EXPECT_EQ(ClassifyGpuCell(busy_other, 600, t), GpuCellState::kFine);
  EXPECT_EQ(ClassifyGpuCell(GpuCellReadings{}, 600, t), GpuCellState::kUnknown);
}

TEST(GpuCellState, LowUtilisationIsUnderused) {
  GpuCellReadings low{.samples = 5, .util_mean = 12, .util_max = 40, .processes = 1};
  EXPECT_EQ(ClassifyGpuCell(low, 600, {}), GpuCellState::kUnderused);
  EXPECT_EQ(NothingRunning(low), 0);
  EXPECT_EQ(NothingRunning(GpuCellReadings{}), -1);
}

TEST(GpuCellState, ASharedGpuBusyWithANeighboursWorkIsNoProcessForAJobWithoutProcesses) {
  const GpuCellThresholds t;
  GpuCellReadings neighbours = Busy(500);
  neighbours.job_processes = 0;
  neighbours.allocated_jobs = 2;  // gres/shard: another job's kernels keep it busy
  EXPECT_EQ(ClassifyGpuCell(neighbours, 600, t), GpuCellState::kNoProcess);
  EXPECT_FALSE(ActiveForJob(neighbours, t));
  neighbours.allocated_jobs = 1;  // not shared: the job-level count may miss a process
  EXPECT_TRUE(ActiveForJob(neighbours, t));
  EXPECT_EQ(ClassifyGpuCell(neighbours, 600, t), GpuCellState::kFine);
}

TEST(GpuCellState, ASharedGpuIsNeverJudgedSpinningOnItsNeighboursKernels) {
  const GpuCellThresholds t;
  GpuCellReadings spinning = Busy(90, 0.01);
  EXPECT_EQ(ClassifyGpuCell(spinning, 600, t), GpuCellState::kSpinning);
  spinning.allocated_jobs = 3;
  EXPECT_EQ(ClassifyGpuCell(spinning, 600, t), GpuCellState::kFine);
  EXPECT_TRUE(ActiveForJob(spinning, t));
  // The whole GPU underused: the job's part of it was no more.
  GpuCellReadings low{.samples = 5,
                      .util_mean = 12,
                      .util_max = 40,
                      .processes = 2,
                      .job_processes = 1,
                      .allocated_jobs = 2};
  EXPECT_EQ(ClassifyGpuCell(low, 600, t), GpuCellState::kUnderused);
}

}  // namespace
}  // namespace expanse::wire
