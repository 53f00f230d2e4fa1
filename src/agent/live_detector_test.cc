#include "agent/live_detector.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::agent {
namespace live_detector_test {
namespace {

constexpr int64_t kStart = 1'800'000'000'000;
constexpr int64_t kFlushMs = 10'000;

// n samples one second apart from t0, all `value`.
wire::SeriesRecord Series(const std::string& host, const std::string& device,
                          const std::string& metric, int64_t t0, double value, int n = 10) {
  wire::SeriesRecord s{
      .host = host, .device = device, .metric = metric, .t0 = t0, .dt = {}, .v = {}};
  for (int i = 0; i < n; ++i) {
    s.dt.push_back(i == 0 ? 0 : 1000);
    s.v.push_back(value);
  }
  return s;
}

wire::GpuAllocationRecord Allocation(const std::string& job, const std::string& host,
                                     const std::string& uuid, int64_t to_ms = 0) {
  return {.job_id = job,
          .host = host,
          .gpu_uuid = uuid,
          .gpu_index = 0,
          .gpu_minor = 0,
          .from_ms = kStart,
          .to_ms = to_ms,
          .slurm_job_id = 77};
}

struct Reading {
  double util;
  double power;
  double processes = 1;
};

class LiveDetectorTest : public ::testing::Test {
 protected:
  LiveDetectorTest() : detector_(Options()) {}

  static LiveDetectorOptions Options() {
    LiveDetectorOptions o;
    o.stuck_after_ms = 60'000;
    o.no_process_after_ms = 60'000;
    o.rearm_after_ms = 30'000;
    return o;
  }

  // One flush (10 s) of every GPU in `gpus` (host, uuid) with the same readings; the job's
  // processes on each host follow `r.processes`.
  std::vector<LiveTrigger> Flush(const std::vector<std::pair<std::string, std::string>>& gpus,
                                 const Reading& r, const std::string& job = "77") {
    std::vector<wire::SeriesRecord> series;
    for (const auto& [host, uuid] : gpus) {
      series.push_back(Series(host, uuid, "gpu.sm_util", now_, r.util));
      series.push_back(Series(host, uuid, "gpu.power_w", now_, r.power));
      series.push_back(Series(host, uuid, "gpu.processes", now_, r.processes, 1));
      series.push_back(Series(host, "job/" + job, "job.gpu_processes", now_, r.processes, 1));
    }
    detector_.NoteSeries(series, now_);
    now_ += kFlushMs;
    return detector_.TakeTriggers(now_);
  }

  // Flushes until a trigger or `max_flushes`; the flushes it took, -1 for none.
  int FlushesUntilTrigger(const std::vector<std::pair<std::string, std::string>>& gpus,
                          const Reading& r, int max_flushes, LiveTrigger* got = nullptr) {
    for (int i = 1; i <= max_flushes; ++i) {
      std::vector<LiveTrigger> t = Flush(gpus, r);
      if (!t.empty()) {
        EXPECT_EQ(t.size(), 1u);
        if (got != nullptr)
          *got = t[0];
        return i;
      }
    }
    return -1;
  }

  LiveDetector detector_;
  int64_t now_ = kStart;
};

const std::vector<std::pair<std::string, std::string>> kTwoNodes = {{"w1", "GPU-a"},
                                                                    {"w2", "GPU-b"}};
const Reading kTraining{100, 400};
const Reading kHung{100, 60};  // utilisation pegged at a sixth of the GPU's own peak power

TEST_F(LiveDetectorTest, StuckAfterTheThresholdNotBefore) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 3), -1);
  // The run's first cell starts at its first sample: 60 s of samples end in the 7th flush.
  LiveTrigger t;
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 20, &t), 7);
  EXPECT_EQ(t.job_id, "77");
  EXPECT_EQ(t.slurm_job_id, 77);
  EXPECT_EQ(t.reason, "stuck");
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(t.gpus, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(t.since_ms, kStart + 3 * kFlushMs);
  EXPECT_GE(t.through_ms - t.since_ms, 60'000);
}

TEST_F(LiveDetectorTest, SpinningShorterThanTheThresholdIsNotStuck) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  for (int round = 0; round < 10; ++round) {
    EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 2), -1);
    EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 5), -1);  // 50 s: a collective's wait
  }
  EXPECT_EQ(detector_.stats().triggers, 0u);
}

TEST_F(LiveDetectorTest, HealthyBusyJobNeverFires) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 200), -1);
  // Memory-bound work at a third of the peak and light use are not stuck either.
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, {100, 140}, 50), -1);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, {20, 90}, 50), -1);
  EXPECT_EQ(detector_.stats().triggers, 0u);
  EXPECT_GT(detector_.stats().cells, 0u);
}

TEST_F(LiveDetectorTest, CountersDecideWhenPresent) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  for (int i = 0; i < 20; ++i) {
    // Full power but SM activity at zero: kernels resident and waiting.
    std::vector<wire::SeriesRecord> series = {Series("w1", "GPU-a", "gpu.sm_util", now_, 100),
                                              Series("w1", "GPU-a", "gpu.power_w", now_, 400),
                                              Series("w1", "GPU-a", "gpu.sm_active", now_, 0.0)};
    detector_.NoteSeries(series, now_);
    now_ += kFlushMs;
    if (!detector_.TakeTriggers(now_).empty()) {
      EXPECT_EQ(i, 6);
      return;
    }
  }
  ADD_FAILURE() << "never flagged";
}

TEST_F(LiveDetectorTest, NoProcessWhenNoGpuOfTheJobHasOne) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  LiveTrigger t;
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, {0, 60, 0}, 20, &t), 7);
  EXPECT_EQ(t.reason, "no_process");
  EXPECT_EQ(t.hosts, (std::vector<std::string>{"w1", "w2"}));
}

TEST_F(LiveDetectorTest, NoProcessOnAnUnsampledGpuFromTheJobsCount) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  for (int i = 1; i <= 20; ++i) {
    // The GPU's own series are missing; the job reports no process on the host.
    detector_.NoteSeries({Series("w1", "job/77", "job.gpu_processes", now_, 0)}, now_);
    now_ += kFlushMs;
    if (!detector_.TakeTriggers(now_).empty()) {
      EXPECT_EQ(i, 7);
      return;
    }
  }
  ADD_FAILURE() << "never flagged";
}

TEST_F(LiveDetectorTest, AJobUsingSomeOfItsGpusIsNotNoProcess) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-b"), now_);
  for (int i = 0; i < 30; ++i) {
    detector_.NoteSeries({Series("w1", "GPU-a", "gpu.sm_util", now_, 95),
                          Series("w1", "GPU-a", "gpu.power_w", now_, 400),
                          Series("w1", "GPU-a", "gpu.processes", now_, 1),
                          Series("w1", "GPU-b", "gpu.sm_util", now_, 0),
                          Series("w1", "GPU-b", "gpu.processes", now_, 0)},
                         now_);
    now_ += kFlushMs;
    EXPECT_TRUE(detector_.TakeTriggers(now_).empty());
  }
}

TEST_F(LiveDetectorTest, OneTriggerPerEpisodeAndANewOneAfterRecovery) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 2), -1);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 20), 7);
  // Still hung, with a short recovery (shorter than rearm_after) in between: same episode.
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 50), -1);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 2), -1);
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 50), -1);
  EXPECT_EQ(detector_.stats().triggers, 1u);
  // A real recovery ends the episode; hanging again is a new one.
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kTraining, 6), -1);
  LiveTrigger t;
  EXPECT_EQ(FlushesUntilTrigger(kTwoNodes, kHung, 20, &t), 7);
  EXPECT_EQ(t.reason, "stuck");
  EXPECT_EQ(detector_.stats().triggers, 2u);
}

TEST_F(LiveDetectorTest, EndedJobsAreForgotten) {
  for (const auto& [host, uuid] : kTwoNodes)
    detector_.NoteAllocation(Allocation("77", host, uuid), now_);
  detector_.NoteAllocation(Allocation("78", "w3", "GPU-c"), now_);
  detector_.NoteAllocation(Allocation("79", "w4", "GPU-d"), now_);
  EXPECT_EQ(detector_.tracked_jobs(), 3u);
  // The Epilog's allocation end.
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a", kStart + 1000), now_);
  detector_.NoteAllocation(Allocation("77", "w2", "GPU-b", kStart + 1000), now_);
  EXPECT_EQ(detector_.tracked_jobs(), 2u);
  // SLURM no longer runs 78.
  detector_.KeepOnlyJobs({"79"});
  EXPECT_EQ(detector_.tracked_jobs(), 1u);
  EXPECT_EQ(detector_.tracked_gpus(), 1u);
  // 79's GPU falls silent while others report for over an hour.
  detector_.NoteAllocation(Allocation("80", "w5", "GPU-e"), now_);
  for (int i = 0; i < 400; ++i)
    Flush({{"w5", "GPU-e"}}, kTraining, "80");
  EXPECT_EQ(detector_.tracked_jobs(), 1u);
  EXPECT_EQ(detector_.tracked_gpus(), 1u);
  EXPECT_EQ(detector_.stats().gpus_forgotten, 4u);
  // Series of GPUs no job holds are not tracked.
  Flush({{"w9", "GPU-z"}}, kHung, "99");
  EXPECT_EQ(detector_.tracked_gpus(), 1u);
}

// Silence is measured on the controller's clock: a worker whose clock runs hours ahead, or a
// record dated in the far future, cannot make the other hosts' GPUs look silent.
TEST_F(LiveDetectorTest, AWorkerClockFarAheadForgetsNoOtherGpu) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  detector_.NoteAllocation(Allocation("78", "w2", "GPU-b"), now_);
  constexpr int64_t kFarFuture = 253'402'300'000'000;  // year 9999, the wire's limit
  for (const int64_t t0 : {now_ + 2 * 3'600'000, kFarFuture}) {
    detector_.NoteSeries({Series("w2", "GPU-b", "gpu.sm_util", t0, 90),
                          Series("w2", "GPU-b", "gpu.power_w", t0, 400)},
                         now_);
    EXPECT_TRUE(detector_.TakeTriggers(now_).empty());
    EXPECT_EQ(detector_.tracked_gpus(), 2u);
  }
  // w1's GPU is still flagged on its own samples (a busy flush first: its own peak power).
  EXPECT_EQ(FlushesUntilTrigger({{"w1", "GPU-a"}}, kTraining, 1), -1);
  LiveTrigger t;
  EXPECT_EQ(FlushesUntilTrigger({{"w1", "GPU-a"}}, kHung, 20, &t), 7);
  EXPECT_EQ(t.reason, "stuck");
  // Once nothing of it has arrived for over an hour of the controller's time, it goes.
  now_ += 3'600'000 + kFlushMs;
  detector_.NoteSeries({Series("w2", "GPU-b", "gpu.sm_util", kFarFuture, 90)}, now_);
  EXPECT_TRUE(detector_.TakeTriggers(now_).empty());
  EXPECT_EQ(detector_.tracked_gpus(), 1u);
  EXPECT_EQ(detector_.tracked_jobs(), 1u);
}

TEST_F(LiveDetectorTest, TrackedGpusAreBounded) {
  LiveDetectorOptions o = Options();
  o.max_gpus = 2;
  LiveDetector small(o);
  small.NoteAllocation(Allocation("1", "w1", "GPU-a"), now_);
  small.NoteAllocation(Allocation("1", "w1", "GPU-b"), now_);
  small.NoteAllocation(Allocation("2", "w2", "GPU-c"), now_);
  EXPECT_EQ(small.tracked_gpus(), 2u);
  EXPECT_EQ(small.stats().gpus_refused, 1u);
  // A second job's track of a tracked GPU counts against the bound too.
  small.NoteAllocation(Allocation("3", "w1", "GPU-a"), now_);
  EXPECT_EQ(small.tracked_gpus(), 2u);
  EXPECT_EQ(small.stats().gpus_refused, 2u);
  // Once job 1 leaves squeue (its Epilog missed), job 3 can have it.
  small.KeepOnlyJobs({"2", "3"});
  small.NoteAllocation(Allocation("3", "w1", "GPU-a"), now_);
  EXPECT_EQ(small.tracked_gpus(), 1u);
  EXPECT_EQ(small.tracked_jobs(), 1u);
}

// gres/shard: jobs 77 and 78 hold GPU-a; 77's kernels spin there, 78 has no process on any
// GPU. Each is judged with its own processes: 78 is no_process (never stuck on 77's kernels),
// and 77's spinning cannot be told from 78's, so neither is flagged stuck while they share.
TEST_F(LiveDetectorTest, ASharedGpuJudgesEachJobOnItsOwnProcesses) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  std::vector<LiveTrigger> all;
  auto flush = [&](double power, double jobs) {
    std::vector<wire::SeriesRecord> series = {
        Series("w1", "GPU-a", "gpu.sm_util", now_, 100),
        Series("w1", "GPU-a", "gpu.power_w", now_, power),
        Series("w1", "GPU-a", "gpu.processes", now_, 1, 1),
        Series("w1", "GPU-a", "gpu.allocated_jobs", now_, jobs, 1),
        Series("w1", "job/77", "job.gpu_processes", now_, 1, 1)};
    if (jobs > 1)
      series.push_back(Series("w1", "job/78", "job.gpu_processes", now_, 0, 1));
    detector_.NoteSeries(series, now_);
    now_ += kFlushMs;
    for (LiveTrigger& t : detector_.TakeTriggers(now_))
      all.push_back(std::move(t));
  };
  flush(400, 1);  // the GPU's own peak
  for (int i = 0; i < 3; ++i)
    flush(60, 1);  // 77 alone spins for a while, short of the threshold
  detector_.NoteAllocation(Allocation("78", "w1", "GPU-a"), now_);
  EXPECT_EQ(detector_.tracked_gpus(), 2u);
  EXPECT_EQ(detector_.tracked_jobs(), 2u);
  for (int i = 0; i < 20; ++i)
    flush(60, 2);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].job_id, "78");
  EXPECT_EQ(all[0].reason, "no_process");
  EXPECT_EQ(all[0].gpus, std::vector<std::string>{"GPU-a"});
  // Once 78 has gone the GPU is 77's alone, and the same readings are stuck after the whole
  // threshold: the shared stretch ended the run 77 had begun alone.
  detector_.NoteAllocation(Allocation("78", "w1", "GPU-a", now_), now_);
  int flushes = 0;
  while (all.size() == 1 && flushes < 20) {
    flush(60, 1);
    ++flushes;
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].job_id, "77");
  EXPECT_EQ(all[1].reason, "stuck");
  EXPECT_EQ(flushes, 7);
}

// Job 77's Epilog never arrived and squeue cannot be read; GPU-a went to job 78, whose kernels
// hang. The node counts one job on the GPU and sends 78's processes only: 77's stale track is
// neither judged on 78's readings (it would be flagged stuck) nor kept alive by them.
TEST_F(LiveDetectorTest, AStaleTrackIsNotJudgedOnTheNextJobsReadings) {
  detector_.NoteAllocation(Allocation("77", "w1", "GPU-a"), now_);
  detector_.NoteAllocation(Allocation("78", "w1", "GPU-a"), now_);
  std::vector<LiveTrigger> all;
  auto flush = [&](double power) {
    detector_.NoteSeries({Series("w1", "GPU-a", "gpu.sm_util", now_, 100),
                          Series("w1", "GPU-a", "gpu.power_w", now_, power),
                          Series("w1", "GPU-a", "gpu.processes", now_, 1, 1),
                          Series("w1", "GPU-a", "gpu.allocated_jobs", now_, 1, 1),
                          Series("w1", "job/78", "job.gpu_processes", now_, 1, 1)},
                         now_);
    now_ += kFlushMs;
    for (LiveTrigger& t : detector_.TakeTriggers(now_))
      all.push_back(std::move(t));
  };
  flush(400);
  for (int i = 0; i < 20; ++i)
    flush(60);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].job_id, "78");
  EXPECT_EQ(all[0].reason, "stuck");
  EXPECT_EQ(detector_.tracked_gpus(), 2u);
  // An hour of the controller's time later, only 78's track is left.
  for (int i = 0; i < 370; ++i)
    flush(400);
  EXPECT_EQ(detector_.tracked_gpus(), 1u);
  EXPECT_EQ(detector_.tracked_jobs(), 1u);
}

}  // namespace
}  // namespace live_detector_test
}  // namespace expanse::agent
