#include "server/verdict_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/frame_classes.h"

namespace expanse::server {
namespace verdict_rules_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kCell = 60'000;

// A healthy busy cell: a kernel always running, SMs busy, one process, high power.
GpuCell Busy() { return {60, 97, 100, 610, 40'000, 0.62, 1}; }
GpuCell Idle(double processes = 1) { return {60, 0, 0, 80, 40'000, -1, processes}; }

struct JobBuilder {
  JobCells job;
  explicit JobBuilder(size_t cells) {
    job.start_ms = kT0;
    job.cell_ms = kCell;
    job.cells = cells;
  }
  GpuTrack& Gpu(const std::string& uuid, GpuCell fill, const std::string& host = "w1") {
    GpuTrack gpu;
    gpu.host = host;
    gpu.uuid = uuid;
    gpu.model = "NVIDIA H200";
    gpu.memory_total_mib = 143'771;
    gpu.first_cell = 0;
    gpu.end_cell = job.cells;
    gpu.cells.assign(job.cells, fill);
    job.gpus.push_back(gpu);
    job.requested_gpus = static_cast<int64_t>(job.gpus.size());
    return job.gpus.back();
  }
  HostTrack& Host(const std::string& host, double cores_allocated, double cores_used,
                  double job_gpu_processes) {
    HostTrack h;
    h.host = host;
    h.cores_allocated = cores_allocated;
    h.cpu_cores.assign(job.cells, cores_used);
    h.gpu_processes.assign(job.cells, job_gpu_processes);
    job.hosts.push_back(h);
    return job.hosts.back();
  }
};

std::vector<std::string> Codes(const SeriesVerdicts& v) {
  std::vector<std::string> codes;
  for (const Verdict& verdict : v.verdicts)
    codes.push_back(verdict.code);
  return codes;
}

TEST(VerdictRulesTest, AHealthyBusyJobGetsNoVerdict) {
  JobBuilder b(30);
  b.Gpu("GPU-a", Busy());
  b.Gpu("GPU-b", Busy());
  b.Host("w1", 16, 6, 2);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  EXPECT_TRUE(v.verdicts.empty()) << v.verdicts[0].code;
  EXPECT_TRUE(v.underused.empty());
}

TEST(VerdictRulesTest, GpusHeldWithNothingOnThemAreNoProcessForExactlyThatInterval) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  for (size_t i = 0; i < 5; ++i)
    gpu.cells[i] = Idle(0);
  HostTrack& host = b.Host("w1", 8, 1, 1);
  for (size_t i = 0; i < 5; ++i)
    host.gpu_processes[i] = 0;
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"no_process"});
  const Verdict& verdict = v.verdicts[0];
  EXPECT_EQ(verdict.from_ms, kT0);
  EXPECT_EQ(verdict.to_ms, kT0 + 5 * kCell);
  EXPECT_EQ(verdict.gpus, std::vector<std::string>{"GPU-a"});
  EXPECT_EQ(verdict.evidence["gpus"][0]["gpu_processes_max"], 0);
  EXPECT_EQ(verdict.evidence["gpus"][0]["sm_util_mean"], 0);
  EXPECT_FALSE(verdict.suggestion.empty());
}

TEST(VerdictRulesTest, AnIntervalShorterThanTheMinimumIsNoVerdict) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  gpu.cells[3] = Idle(0);  // one minute with nothing on the GPU
  VerdictThresholds t;
  t.min_interval_ms = 2 * kCell;
  EXPECT_TRUE(ComputeSeriesVerdicts(b.job, t).verdicts.empty());
  t.min_interval_ms = kCell;
  EXPECT_EQ(Codes(ComputeSeriesVerdicts(b.job, t)), std::vector<std::string>{"no_process"});
}

TEST(VerdictRulesTest, AJobThatNeverTouchedItsGpusIsCpuOnlyAndNothingElse) {
  JobBuilder b(20);
  b.Gpu("GPU-a", Idle(0));
  b.Gpu("GPU-b", Idle(0));
  b.Host("w1", 8, 3.5, 0);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"cpu_only"});
  EXPECT_EQ(v.verdicts[0].from_ms, kT0);
  EXPECT_EQ(v.verdicts[0].to_ms, kT0 + 20 * kCell);
  EXPECT_NEAR(v.verdicts[0].evidence["cpu_cores_used_mean"].get<double>(), 3.5, 1e-9);
  EXPECT_THAT(v.verdicts[0].suggestion, HasSubstr("without --gres=gpu"));
}

// A running job's first minutes may be CPU preprocessing: no cpu_only until it has run 10
// minutes; its no_process intervals are said meanwhile. over_allocated is said at once (at
// lower confidence while the job is young).
TEST(VerdictRulesTest, CpuOnlyWaitsForARunningJobsFirstTenMinutes) {
  for (const bool settled : {false, true}) {
    SCOPED_TRACE(settled ? "after 10 min" : "3 min in");
    const size_t cells = settled ? 10 : 3;  // 60 s cells
    JobBuilder b(cells);
    b.job.running = true;
    b.job.end_ms = kT0 + static_cast<int64_t>(cells) * kCell;
    b.Gpu("GPU-a", Idle(0));
    b.Host("w1", 8, 3.5, 0);
    EXPECT_EQ(Codes(ComputeSeriesVerdicts(b.job, {})),
              std::vector<std::string>{settled ? "cpu_only" : "no_process"});

    JobBuilder two(cells);
    two.job.running = true;
    two.job.end_ms = kT0 + static_cast<int64_t>(cells) * kCell;
    two.Gpu("GPU-a", Busy());
    two.Gpu("GPU-b", Idle(1));  // its rank's process is up, not yet computing
    two.Host("w1", 8, 3.5, 2);
    const SeriesVerdicts v = ComputeSeriesVerdicts(two.job, {});
    const auto over = std::find_if(v.verdicts.begin(), v.verdicts.end(),
                                   [](const Verdict& x) { return x.code == "over_allocated"; });
    ASSERT_NE(over, v.verdicts.end());
    EXPECT_EQ(over->confidence, settled ? 0.9 : 0.6);
  }
}

TEST(VerdictRulesTest, ACpuOnlyJobStarvedOfItsCoreIsStillCpuOnly) {
  // A spinning job on a host whose cores are shared: it got under half a core and waited for
  // the rest. What it wanted, not what it got, makes it a CPU job.
  JobBuilder b(20);
  b.Gpu("GPU-a", Idle(0));
  HostTrack& host = b.Host("w1", 1, 0.43, 0);
  host.cpu_wait.assign(b.job.cells, 0.57);
  host.cpu_wait[0] = -1;  // the first reading has no rate yet
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"cpu_only"});
  // Rounded to the hundredth as written (not 0.5700000000000001).
  EXPECT_EQ(v.verdicts[0].evidence["cpu_cores_used_mean"].dump(), "0.43");
  EXPECT_EQ(v.verdicts[0].evidence["cpu_cores_waiting_mean"].dump(), "0.57");

  // Little used and little wanted: a job that mostly slept, its GPU held for nothing.
  b.job.hosts[0].cpu_wait.assign(b.job.cells, 0.05);
  EXPECT_EQ(Codes(ComputeSeriesVerdicts(b.job, {})), std::vector<std::string>{"no_process"});
  // Without a wait series (a daemon that does not send it) only the cores used count.
  b.job.hosts[0].cpu_wait.clear();
  EXPECT_EQ(Codes(ComputeSeriesVerdicts(b.job, {})), std::vector<std::string>{"no_process"});
}

TEST(VerdictRulesTest, FourGpusWithOneActiveIsOverAllocated) {
  JobBuilder b(20);
  b.Gpu("GPU-a", Busy());
  for (const char* uuid : {"GPU-b", "GPU-c", "GPU-d"})
    b.Gpu(uuid, Idle(0));
  b.Host("w1", 16, 4, 1);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  // The three idle GPUs are one no_process interval; the job as a whole is over-allocated.
  ASSERT_EQ(Codes(v), (std::vector<std::string>{"no_process", "over_allocated"}));
  EXPECT_EQ(v.verdicts[0].gpus, (std::vector<std::string>{"GPU-b", "GPU-c", "GPU-d"}));
  const Verdict& over = v.verdicts[1];
  EXPECT_EQ(over.evidence["gpus_allocated"], 4);
  EXPECT_EQ(over.evidence["gpus_active"], 1);
  EXPECT_EQ(over.suggestion, "ask for 1 GPU, not 4 (--gres=gpu:1)");
}

// gres/shard: SLURM gave GPU-a to this job and another; the other's kernels spin there.
TEST(VerdictRulesTest, ASharedGpuIsJudgedOnTheJobsOwnProcessesNotItsNeighbours) {
  GpuCell neighbours_spinning = Busy();
  neighbours_spinning.sm_active = 0.001;
  neighbours_spinning.allocated_jobs = 2;
  {
    SCOPED_TRACE("the job never ran anything on GPUs: cpu_only, not stuck");
    JobBuilder b(20);
    b.Gpu("GPU-a", neighbours_spinning);
    b.Host("w1", 8, 3, 0);
    const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
    ASSERT_EQ(Codes(v), std::vector<std::string>{"cpu_only"});
    EXPECT_EQ(v.verdicts[0].evidence["gpus"][0]["active_s"], 0);
  }
  {
    SCOPED_TRACE("idle for its first 5 minutes: no_process with the sharing in evidence");
    JobBuilder b(20);
    GpuCell own = Busy();
    own.allocated_jobs = 2;
    GpuTrack& gpu = b.Gpu("GPU-a", own);
    for (size_t i = 0; i < 5; ++i)
      gpu.cells[i] = neighbours_spinning;
    HostTrack& host = b.Host("w1", 8, 1, 1);
    for (size_t i = 0; i < 5; ++i)
      host.gpu_processes[i] = 0;
    const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
    ASSERT_EQ(Codes(v), std::vector<std::string>{"no_process"});
    EXPECT_EQ(v.verdicts[0].to_ms, kT0 + 5 * kCell);
    EXPECT_EQ(v.verdicts[0].evidence["gpus"][0]["allocated_jobs_max"], 2);
  }
  {
    SCOPED_TRACE("its processes there: whose kernels spin cannot be told, so no stuck");
    JobBuilder b(20);
    b.Gpu("GPU-a", neighbours_spinning);
    b.Host("w1", 8, 1, 1);
    EXPECT_TRUE(ComputeSeriesVerdicts(b.job, {}).verdicts.empty());
    // The same GPU not shared: stuck.
    b.job.gpus[0].cells.assign(20, Busy());
    for (GpuCell& c : b.job.gpus[0].cells)
      c.sm_active = 0.001;
    EXPECT_EQ(Codes(ComputeSeriesVerdicts(b.job, {})), std::vector<std::string>{"stuck"});
  }
}

TEST(VerdictRulesTest, BusyWithSmActivityNearZeroForLongIsStuckAndShortIsCommunicationWait) {
  JobBuilder b(40);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  GpuCell spinning = Busy();
  spinning.sm_active = 0.001;
  spinning.power_mean = 120;
  for (size_t i = 5; i < 8; ++i)  // 3 minutes
    gpu.cells[i] = spinning;
  for (size_t i = 20; i < 35; ++i)  // 15 minutes
    gpu.cells[i] = spinning;
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), (std::vector<std::string>{"communication_wait", "stuck"}));
  EXPECT_EQ(v.verdicts[0].from_ms, kT0 + 5 * kCell);
  EXPECT_EQ(v.verdicts[0].to_ms, kT0 + 8 * kCell);
  const Verdict& stuck = v.verdicts[1];
  EXPECT_EQ(stuck.from_ms, kT0 + 20 * kCell);
  EXPECT_EQ(stuck.to_ms, kT0 + 35 * kCell);
  EXPECT_DOUBLE_EQ(stuck.confidence, 0.9);
  EXPECT_EQ(stuck.evidence["gpus"][0]["sm_active_mean"], 0.001);
  EXPECT_EQ(stuck.evidence["gpus"][0]["sm_util_mean"], 97);
  EXPECT_EQ(stuck.evidence["rule"], "utilisation high while SM activity stayed near zero");
}

TEST(VerdictRulesTest, WithoutCountersAHangIsUtilisationHighAtAFractionOfThePeakPower) {
  JobBuilder b(30);
  GpuCell working = Busy();
  working.sm_active = -1;
  GpuTrack& gpu = b.Gpu("GPU-a", working);
  GpuCell hung = working;
  hung.power_mean = 95;
  for (size_t i = 10; i < 30; ++i)
    gpu.cells[i] = hung;
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"stuck"});
  EXPECT_EQ(v.verdicts[0].from_ms, kT0 + 10 * kCell);
  EXPECT_EQ(v.verdicts[0].to_ms, kT0 + 30 * kCell);
  EXPECT_DOUBLE_EQ(v.verdicts[0].confidence, 0.6);
  EXPECT_NEAR(v.verdicts[0].evidence["gpus"][0]["power_share_of_job_peak"].get<double>(), 0.156,
              1e-9);
  // A job at a steady power it never rose above is not called stuck without counters.
  JobBuilder steady(30);
  GpuCell low = working;
  low.power_mean = 95;
  steady.Gpu("GPU-a", low);
  EXPECT_TRUE(ComputeSeriesVerdicts(steady.job, {}).verdicts.empty());
}

TEST(VerdictRulesTest, APeakFarBelowTheGpusMemoryNamesAMigSlice) {
  JobBuilder b(10);
  GpuCell small = Busy();
  small.mem_max_mib = 12 * 1024;
  b.Gpu("GPU-a", small);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"memory_oversized"});
  EXPECT_EQ(v.verdicts[0].suggestion,
            "12 GiB of 140 GiB used at the peak: a MIG 1g.18gb slice would do");
  EXPECT_NEAR(v.verdicts[0].evidence["share"].get<double>(), 0.085, 1e-9);
}

TEST(VerdictRulesTest, UnderusedIntervalsAreLeftToTheStacksWithTheirCpu) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  GpuCell waiting = Busy();
  waiting.util_mean = 12;
  waiting.util_max = 40;
  for (size_t i = 4; i < 12; ++i)
    gpu.cells[i] = waiting;
  b.Host("w1", 8, 7.6, 1);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  EXPECT_TRUE(v.verdicts.empty());
  ASSERT_EQ(v.underused.size(), 1u);
  const Underused& u = v.underused[0];
  EXPECT_EQ(u.from_ms, kT0 + 4 * kCell);
  EXPECT_EQ(u.to_ms, kT0 + 12 * kCell);
  EXPECT_TRUE(u.cpu_saturated);
  EXPECT_NEAR(u.evidence["cpu"]["cores_used_mean"].get<double>(), 7.6, 1e-9);

  // Mostly in the DataLoader: input_bound, naming the frame.
  const std::vector<store::StackTotal> loading = {
      {"train.py:<module>:1;train.py:main:40;torch/utils/data/dataloader.py:__next__:631;"
       "torch/utils/data/dataloader.py:_next_data:1318",
       "idle", 70, 0},
      {"train.py:<module>:1;train.py:main:44;train.py:step:12", "gil", 30, 0}};
  auto verdict = ExplainUnderused(u, loading, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "input_bound");
  EXPECT_DOUBLE_EQ(verdict->confidence, 0.85);
  EXPECT_EQ(verdict->evidence["stacks"]["input"], 70);
  EXPECT_EQ(verdict->evidence["stacks"]["top"][0]["count"], 70);
  EXPECT_THAT(verdict->suggestion,
              HasSubstr("GPU idle, 70 % of the job's stack samples in data loading "
                        "(`torch/utils/data/dataloader.py:_next_data:1318`): raise the "
                        "DataLoader's num_workers"));

  // Samples taken while the GPUs were idle are the ones that count.
  const std::vector<store::StackTotal> collective = {
      {"train.py:main:40;torch/distributed/distributed_c10d.py:all_reduce:2050", "idle", 50, 45},
      {"train.py:main:44;train.py:step:12", "gil", 400, 5}};
  verdict = ExplainUnderused(u, collective, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "communication_wait");
  EXPECT_EQ(verdict->evidence["stacks"]["samples"], 50);
  EXPECT_EQ(verdict->evidence["stacks"]["gpu_idle_samples_only"], true);

  // Stacks that say nothing, but every CPU of the job busy: host_bound.
  const std::vector<store::StackTotal> busy_cpu = {
      {"train.py:main:44;augment.py:rotate:88", "gil", 100, 0}};
  verdict = ExplainUnderused(u, busy_cpu, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "host_bound");
  EXPECT_THAT(verdict->suggestion, HasSubstr("the job's 8 CPUs on w1 were saturated"));
  // And with CPUs to spare, nothing is claimed.
  Underused spare = u;
  spare.cpu_saturated = false;
  EXPECT_FALSE(ExplainUnderused(spare, busy_cpu, {}));
}

TEST(VerdictRulesTest, AJobWaitingForCpuOnAnOversubscribedHostIsSaturated) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  GpuCell waiting = Busy();
  waiting.util_mean = 12;
  waiting.util_max = 40;
  for (size_t i = 4; i < 12; ++i)
    gpu.cells[i] = waiting;
  // 1 CPU allocated, 0.6 of it got: the job's thread waited 0.4 of a core for a CPU.
  HostTrack& host = b.Host("w1", 1, 0.6, 1);
  host.cpu_wait.assign(b.job.cells, 0.4);
  SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_TRUE(v.underused[0].cpu_saturated);
  EXPECT_NEAR(v.underused[0].evidence["cpu"]["cores_waiting_mean"].get<double>(), 0.4, 1e-9);
  const auto verdict = ExplainUnderused(v.underused[0], {}, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "host_bound");

  // Wait read every few seconds: cells without a reading (the run's first ones, before a rate
  // exists, and one in the middle) are judged with the nearest reading of the run.
  for (size_t i : {4, 5, 8})
    b.job.hosts[0].cpu_wait[i] = -1;
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_TRUE(v.underused[0].cpu_saturated);
  EXPECT_NEAR(v.underused[0].evidence["cpu"]["cores_waiting_mean"].get<double>(), 0.4, 1e-9);
  b.job.hosts[0].cpu_wait.assign(b.job.cells, 0.4);

  // Neither used nor wanted: the GPU waited on something else.
  b.job.hosts[0].cpu_wait.assign(b.job.cells, 0.05);
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].cpu_saturated);
  // Without the wait series (an older daemon), used CPU alone decides, as before.
  b.job.hosts[0].cpu_wait.clear();
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].cpu_saturated);
  EXPECT_FALSE(v.underused[0].evidence["cpu"].contains("cores_waiting_mean"));
}

TEST(VerdictRulesTest, UnderusedWhileTheJobsTasksStallOnIoIsIoWait) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  GpuCell waiting = Busy();
  waiting.util_mean = 8;
  waiting.util_max = 30;
  for (size_t i = 4; i < 12; ++i)
    gpu.cells[i] = waiting;
  HostTrack& host = b.Host("w1", 8, 1.5, 1);  // CPUs to spare
  host.io_some.assign(b.job.cells, 0.02);
  for (size_t i = 4; i < 12; ++i)
    host.io_some[i] = 0.55;
  host.io_some[7] = -1;  // one cell unsampled: the mean is over the sampled ones
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  const Underused& u = v.underused[0];
  EXPECT_TRUE(u.io_stalled);
  EXPECT_FALSE(u.cpu_saturated);
  EXPECT_NEAR(u.evidence["io"]["pressure_some_mean"].get<double>(), 0.55, 1e-9);

  // Stacks that say nothing: the pressure explains the interval.
  const std::vector<store::StackTotal> unclear = {
      {"train.py:main:44;train.py:step:12", "idle", 100, 0}};
  auto verdict = ExplainUnderused(u, unclear, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "io_wait");
  EXPECT_EQ(verdict->from_ms, kT0 + 4 * kCell);
  EXPECT_EQ(verdict->to_ms, kT0 + 12 * kCell);
  EXPECT_EQ(verdict->evidence["io"]["host"], "w1");
  EXPECT_THAT(verdict->suggestion,
              HasSubstr("tasks on w1 were stalled on I/O 55 % of the time: stage the data"));
  // Stacks in data loading still name the place: input_bound, with the pressure as evidence.
  const std::vector<store::StackTotal> loading = {
      {"train.py:main:40;torch/utils/data/dataloader.py:__next__:631", "idle", 80, 0}};
  verdict = ExplainUnderused(u, loading, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "input_bound");
  EXPECT_TRUE(verdict->evidence.contains("io"));

  // Below the threshold, or without the series (cgroup v1), nothing is claimed.
  for (size_t i = 4; i < 12; ++i)
    b.job.hosts[0].io_some[i] = 0.1;
  const SeriesVerdicts low = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(low.underused.size(), 1u);
  EXPECT_FALSE(low.underused[0].io_stalled);
  EXPECT_FALSE(ExplainUnderused(low.underused[0], unclear, {}));
  b.job.hosts[0].io_some.clear();
  const SeriesVerdicts none = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(none.underused.size(), 1u);
  EXPECT_FALSE(none.underused[0].evidence.contains("io"));
  EXPECT_FALSE(ExplainUnderused(none.underused[0], unclear, {}));
}

// cgroup v1 (no pressure): the sampled share of time some thread of the job was blocked in
// uninterruptible sleep stands in; where both are there, the pressure is the one read.
TEST(VerdictRulesTest, WithoutPressureSampledUninterruptibleSleepIsTheIoEvidence) {
  JobBuilder b(20);
  GpuTrack& gpu = b.Gpu("GPU-a", Busy());
  GpuCell waiting = Busy();
  waiting.util_mean = 8;
  waiting.util_max = 30;
  for (size_t i = 4; i < 12; ++i)
    gpu.cells[i] = waiting;
  HostTrack& host = b.Host("w1", 8, 1.5, 1);
  host.uninterruptible.assign(b.job.cells, 0);
  for (size_t i = 4; i < 12; ++i)
    host.uninterruptible[i] = 0.9;
  host.uninterruptible[5] = -1;
  host.uninterruptible[6] = -1;
  host.uninterruptible[7] = -1;
  host.uninterruptible[8] = -1;  // half the interval unsampled: still enough
  SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_TRUE(v.underused[0].io_stalled);
  EXPECT_NEAR(v.underused[0].evidence["io"]["uninterruptible_some_mean"].get<double>(), 0.9, 1e-9);
  EXPECT_FALSE(v.underused[0].evidence["io"].contains("pressure_some_mean"));
  const std::vector<store::StackTotal> unclear = {{"train.py:main:44", "idle", 100, 0}};
  auto verdict = ExplainUnderused(v.underused[0], unclear, {});
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->code, "io_wait");
  EXPECT_THAT(verdict->suggestion,
              HasSubstr("a thread of the job on w1 was in uninterruptible sleep (most often "
                        "waiting on I/O) in 90 % of samples: stage the data"));
  // The states' own threshold (0.5) is higher than pressure's (0.3): 0.4 is not enough.
  for (size_t i = 4; i < 12; ++i) {
    if (b.job.hosts[0].uninterruptible[i] >= 0)
      b.job.hosts[0].uninterruptible[i] = 0.4;
  }
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].io_stalled);
  for (size_t i = 4; i < 12; ++i) {
    if (b.job.hosts[0].uninterruptible[i] >= 0)
      b.job.hosts[0].uninterruptible[i] = 0.9;
  }

  // Less than half the interval sampled: nothing claimed, the figure still shown.
  b.job.hosts[0].uninterruptible[9] = -1;
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].io_stalled);
  EXPECT_TRUE(v.underused[0].evidence["io"].contains("uninterruptible_some_mean"));
  EXPECT_FALSE(ExplainUnderused(v.underused[0], unclear, {}));

  // Pressure where it covers the interval wins over the sampled states: low pressure, no
  // io_wait.
  b.job.hosts[0].io_some.assign(b.job.cells, 0.05);
  for (size_t i = 4; i < 12; ++i)
    b.job.hosts[0].uninterruptible[i] = 0.9;
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].io_stalled);
  EXPECT_NEAR(v.underused[0].evidence["io"]["pressure_some_mean"].get<double>(), 0.05, 1e-9);
  EXPECT_FALSE(v.underused[0].evidence["io"].contains("uninterruptible_some_mean"));

  // Pressure in 3 of the interval's 8 cells (a gap in it), the states in all: the states,
  // which cover it, decide.
  for (size_t i = 4; i < 12; ++i)
    b.job.hosts[0].io_some[i] = i < 7 ? 0.05 : -1;
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_TRUE(v.underused[0].io_stalled);
  EXPECT_NEAR(v.underused[0].evidence["io"]["uninterruptible_some_mean"].get<double>(), 0.9, 1e-9);
  // Neither covers half: the one with more cells is shown, nothing claimed.
  for (size_t i = 4; i < 12; ++i)
    b.job.hosts[0].uninterruptible[i] = i < 6 ? 0.9 : -1;
  v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.underused.size(), 1u);
  EXPECT_FALSE(v.underused[0].io_stalled);
  EXPECT_NEAR(v.underused[0].evidence["io"]["pressure_some_mean"].get<double>(), 0.05, 1e-9);
}

TEST(VerdictRulesTest, MigProfilesAreTheSmallestThatHoldsThePeak) {
  EXPECT_EQ(SmallestMigProfile("NVIDIA H200", 12 * 1024), "1g.18gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA H200", 30 * 1024), "1g.35gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA H100 80GB HBM3", 9 * 1024), "1g.10gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA H100 NVL", 9 * 1024), "1g.12gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA A100-SXM4-80GB", 30 * 1024), "3g.40gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA A100-SXM4-40GB", 4 * 1024), "1g.5gb");
  EXPECT_EQ(SmallestMigProfile("NVIDIA A30", 30 * 1024), "");       // bigger than the GPU
  EXPECT_EQ(SmallestMigProfile("Tesla V100-SXM2-32GB", 1024), "");  // no MIG
}

TEST(FrameClassesTest, AStackIsClassedByItsFrameNearestTheLeaf) {
  std::string_view frame;
  EXPECT_EQ(ClassifyStack("a.py:main:1;torch/utils/data/dataloader.py:__next__:631;"
                          "/usr/lib/python3/dist-packages/PIL/Image.py:open:3200",
                          &frame),
            FrameClass::kInput);
  EXPECT_EQ(frame, "/usr/lib/python3/dist-packages/PIL/Image.py:open:3200");
  EXPECT_EQ(ClassifyStack("a.py:main:1;a.py:all_reduce:9"), FrameClass::kCollective);
  EXPECT_EQ(ClassifyStack("a.py:main:1;site-packages/torch/cuda/__init__.py:synchronize:792"),
            FrameClass::kSync);
  // A user's own directory named like a library is not the library.
  EXPECT_EQ(
      ClassifyStack("/home/u/datasets/train.py:main:1;/home/u/datasets/train.py:step:3", &frame),
      FrameClass::kOther);
  EXPECT_EQ(frame, "");
  EXPECT_EQ(ClassifyFrame("no-colons"), FrameClass::kOther);
  EXPECT_EQ(ClassifyFrame("x.py:read:1"), FrameClass::kInput);
  EXPECT_EQ(FrameClassName(FrameClass::kSync), "sync");
}

TEST(VerdictRulesTest, MissingDataIsNoEvidence) {
  // A GPU never sampled (its node's sampler down) does not make the job over-allocated.
  JobBuilder b(20);
  b.Gpu("GPU-a", Busy());
  b.Gpu("GPU-b", GpuCell{}, "w2");
  EXPECT_TRUE(ComputeSeriesVerdicts(b.job, {}).verdicts.empty());
  // Memory-bound work at a third of its warm-up peak is not a hang.
  JobBuilder decode(30);
  GpuCell warm = Busy();
  warm.sm_active = -1;
  warm.power_mean = 700;
  GpuTrack& gpu = decode.Gpu("GPU-a", warm);
  for (size_t i = 1; i < 30; ++i) {
    gpu.cells[i] = warm;
    gpu.cells[i].power_mean = 250;
  }
  EXPECT_TRUE(ComputeSeriesVerdicts(decode.job, {}).verdicts.empty());
  // A running job may still be loading its model: no memory verdict yet.
  JobBuilder running(10);
  GpuCell small = Busy();
  small.mem_max_mib = 12 * 1024;
  running.Gpu("GPU-a", small);
  running.job.running = true;
  EXPECT_TRUE(ComputeSeriesVerdicts(running.job, {}).verdicts.empty());
}

TEST(VerdictRulesTest, OverSeveralNodesTheSuggestionCountsAllGpus) {
  JobBuilder b(20);
  b.Gpu("GPU-a", Busy(), "w1");
  b.Gpu("GPU-b", Idle(0), "w1");
  b.Gpu("GPU-c", Idle(0), "w2");
  b.Gpu("GPU-d", Idle(0), "w2");
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.verdicts.back().code, "over_allocated");
  EXPECT_EQ(v.verdicts.back().suggestion,
            "ask for 1 GPUs in all, not 4 (fewer nodes or GPUs per node)");
}

TEST(VerdictRulesTest, IntervalsEndAtTheJobsEndNotAtTheLastCellsEnd) {
  JobBuilder b(10);
  b.job.end_ms = kT0 + 9 * kCell + kCell / 2;  // the last cell is cut in half
  b.Gpu("GPU-a", Idle(0));
  b.Host("w1", 4, 0, 0);
  const SeriesVerdicts v = ComputeSeriesVerdicts(b.job, {});
  ASSERT_EQ(v.verdicts.size(), 1u);
  EXPECT_EQ(v.verdicts[0].code, "no_process");
  EXPECT_EQ(v.verdicts[0].to_ms, b.job.end_ms);
}

TEST(FrameClassesTest, BackgroundThreadsSayNothing) {
  // torchrun's agent sleeping, a tracker's HTTPS read: neither collective nor input.
  EXPECT_EQ(ClassifyStack("run.py:main:1;torch/distributed/elastic/agent/server/api.py:run:700;"
                          "torch/distributed/elastic/agent/server/api.py:_monitor:850"),
            FrameClass::kOther);
  EXPECT_EQ(ClassifyStack("threading.py:run:1;wandb/sdk/internal/sender.py:send:9;"
                          "/usr/lib/python3.11/http/client.py:readline:1;"
                          "/usr/lib/python3.11/ssl.py:read:1130"),
            FrameClass::kOther);
}

// PyTorch's pin-memory thread waiting on its queue, and a DataLoader worker process reading a
// sample, are not the training loop waiting for input (the main thread's stack in
// dataloader.py is), even though their leaves are input frames.
TEST(FrameClassesTest, DataLoaderHelpersAreNotTheLoopWaitingForInput) {
  EXPECT_EQ(ClassifyStack("threading.py:_bootstrap:1;threading.py:run:975;"
                          "site-packages/torch/utils/data/_utils/pin_memory.py:_pin_memory_loop:54;"
                          "site-packages/torch/utils/data/_utils/pin_memory.py:do_one_step:31;"
                          "queue.py:get:180;threading.py:wait:324"),
            FrameClass::kOther);
  EXPECT_EQ(ClassifyStack("multiprocessing/process.py:_bootstrap:314;"
                          "site-packages/torch/utils/data/_utils/worker.py:_worker_loop:308;"
                          "site-packages/torch/utils/data/_utils/fetch.py:fetch:51;"
                          "train.py:__getitem__:40;site-packages/PIL/Image.py:open:3243;"
                          "site-packages/PIL/ImageFile.py:load:288"),
            FrameClass::kOther);
  EXPECT_EQ(
      ClassifyStack("train.py:main:1;site-packages/torch/utils/data/dataloader.py:__next__:631;"
                    "site-packages/torch/utils/data/dataloader.py:_next_data:1329;"
                    "queue.py:get:180;threading.py:wait:324"),
      FrameClass::kInput);
}

}  // namespace
}  // namespace verdict_rules_test
}  // namespace expanse::server
