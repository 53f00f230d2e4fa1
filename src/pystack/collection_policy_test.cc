#include "pystack/collection_policy.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::pystack {
namespace collection_policy_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kStart = 1700000000000;

std::vector<pid_t> Pids(const std::vector<SampleTarget>& targets) {
  std::vector<pid_t> pids;
  for (const SampleTarget& target : targets)
    pids.push_back(target.pid);
  return pids;
}

class CollectionPolicyTest : public ::testing::Test {
 protected:
  // Ticks every 100 ms (the loop's cadence at 10 Hz) from now until now + `ms`, recording
  // `cost_us` for every sample, and returns how many times `pid` was due.
  int CountDue(CollectionPolicy& policy, const std::vector<JobProcesses>& jobs, int64_t ms,
               pid_t pid, int64_t cost_us = 0) {
    int count = 0;
    for (int64_t t = 0; t < ms; t += 100) {
      for (const SampleTarget& target : policy.Due(jobs)) {
        policy.Record(target.pid, cost_us);
        count += target.pid == pid ? 1 : 0;
      }
      clock_.Advance(100);
    }
    return count;
  }

  ManualClock clock_{kStart};
};

TEST_F(CollectionPolicyTest, SamplesEveryProcessAtTheBaseRate) {
  CollectionPolicy policy({}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100, 101}, true, false}, {"8", {200}, false}};
  const std::vector<SampleTarget> first = policy.Due(jobs);
  EXPECT_THAT(Pids(first), ElementsAre(100, 101, 200));
  EXPECT_EQ(first[0].job_id, "7");
  EXPECT_FALSE(first[0].burst);
  EXPECT_FALSE(first[0].gpu_idle);

  clock_.Advance(500);
  EXPECT_THAT(policy.Due(jobs), IsEmpty());
  clock_.Advance(500);
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 101, 200));
  clock_.Advance(1000);
  EXPECT_EQ(CountDue(policy, jobs, 10000, 100), 10);
}

TEST_F(CollectionPolicyTest, BaseRateIsConfigurable) {
  CollectionPolicy policy({.base_hz = 0.5}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  EXPECT_EQ(CountDue(policy, jobs, 10000, 100), 5);
}

TEST_F(CollectionPolicyTest, GpusGoingIdleStartABurstThatEnds) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, true, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
  clock_.Advance(300);
  jobs[0].gpus_idle = true;
  // Due at once, although the base rate would wait another 700 ms.
  const std::vector<SampleTarget> burst = policy.Due(jobs);
  ASSERT_THAT(Pids(burst), ElementsAre(100));
  EXPECT_TRUE(burst[0].burst);
  EXPECT_TRUE(burst[0].gpu_idle);
  EXPECT_EQ(policy.stats().bursts_started, 1u);
  clock_.Advance(100);
  // 10 Hz for the rest of the 20 s burst, then 1 Hz while the GPUs stay idle.
  EXPECT_EQ(CountDue(policy, jobs, 19900, 100), 199);
  EXPECT_EQ(CountDue(policy, jobs, 10000, 100), 10);
  const std::vector<SampleTarget> after = policy.Due(jobs);
  if (!after.empty()) {
    EXPECT_FALSE(after[0].burst);
    EXPECT_TRUE(after[0].gpu_idle);
  }
}

// The loop may sleep the base interval between bursts and must tick at the burst rate in one.
TEST_F(CollectionPolicyTest, TickIntervalFollowsTheBurst) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, true, false}};
  policy.Due(jobs);
  EXPECT_EQ(policy.TickIntervalMs(), 1000);
  jobs[0].gpus_idle = true;
  policy.Due(jobs);
  EXPECT_EQ(policy.TickIntervalMs(), 100);
  clock_.Advance(20'001);
  EXPECT_EQ(policy.TickIntervalMs(), 1000);
  CollectionPolicy fast({.base_hz = 4}, &clock_);
  EXPECT_EQ(fast.TickIntervalMs(), 250);
}

// The controller's live burst: at once and at the burst rate whatever the GPUs do (busy
// here, as a hung collective keeps them), with no cooldown after a GPU-idle burst.
TEST_F(CollectionPolicyTest, ARequestedBurstSamplesAtOnceWhileGpusAreBusy) {
  CollectionPolicy policy({.burst_ms = 5000}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, true, false}, {"8", {200}, true, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 200));
  clock_.Advance(300);
  policy.RequestBurst("7");
  const std::vector<SampleTarget> burst = policy.Due(jobs);
  ASSERT_THAT(Pids(burst), ElementsAre(100));
  EXPECT_TRUE(burst[0].burst);
  EXPECT_FALSE(burst[0].gpu_idle);
  EXPECT_EQ(policy.TickIntervalMs(), 100);
  clock_.Advance(100);
  EXPECT_EQ(CountDue(policy, jobs, 4600, 100), 46);  // 10 Hz to the end of the 5 s
  clock_.Advance(1000);
  EXPECT_EQ(CountDue(policy, jobs, 10000, 100), 10);  // then the base rate again
  EXPECT_EQ(policy.stats().bursts_requested, 1u);
  EXPECT_EQ(policy.stats().bursts_started, 0u);
}

// A read torn a moment before the request must not leave the live burst without a stack;
// a process known not to be Python stays alone.
TEST_F(CollectionPolicyTest, ARequestedBurstRetriesProcessesBackedOffByPassingFailures) {
  CollectionPolicy policy({.burst_ms = 5000}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100, 101}, true, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 101));
  EXPECT_TRUE(policy.RecordError(
      100, UnavailableError("py_stacks: torn read").WithReason("inconsistent_read")));
  EXPECT_TRUE(policy.RecordError(
      101, FailedPreconditionError("py_stacks: not Python").WithReason("not_python")));
  clock_.Advance(2000);
  EXPECT_THAT(policy.Due(jobs), IsEmpty());  // both backed off
  policy.RequestBurst("7");
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
  // Failing again backs it off again: the request lifts one backoff, not every later one.
  EXPECT_FALSE(policy.RecordError(
      100, UnavailableError("py_stacks: torn read").WithReason("inconsistent_read")));
  EXPECT_EQ(CountDue(policy, jobs, 5000, 100), 0);
}

// The budget spent (a costly read a moment ago): a requested burst still gets its first read
// at once, which counts against the budget, and nothing more until the window moves.
TEST_F(CollectionPolicyTest, ARequestedBurstReadsOnceEvenWithTheBudgetSpent) {
  CollectionPolicy policy({.burst_ms = 5000, .cpu_percent = 1.0, .budget_window_ms = 10000},
                          &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, true, false}, {"8", {200}, true, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 200));
  policy.Record(100, 150000);  // more than the 100 ms the 10 s window allows
  clock_.Advance(2000);
  EXPECT_THAT(policy.Due(jobs), IsEmpty());
  policy.RequestBurst("7");
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));  // not job 8: nothing asked for it
  policy.Record(100, 1000);
  EXPECT_EQ(policy.cost_in_window_us(), 151000);
  clock_.Advance(100);
  EXPECT_EQ(CountDue(policy, jobs, 4900, 100), 0);
  EXPECT_EQ(CountDue(policy, jobs, 4000, 200), 1);  // the costly read left the window
}

TEST_F(CollectionPolicyTest, IdleFromTheStartIsNoEdge) {
  CollectionPolicy policy({}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, true, true}};
  EXPECT_EQ(CountDue(policy, jobs, 5000, 100), 5);
  EXPECT_EQ(policy.stats().bursts_started, 0u);
}

TEST_F(CollectionPolicyTest, JobsWithoutGpusNeverBurst) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  (void)policy.Due(jobs);
  jobs[0].gpus_idle = true;
  clock_.Advance(100);
  const std::vector<SampleTarget> due = policy.Due(jobs);
  EXPECT_THAT(due, IsEmpty());
  EXPECT_EQ(policy.stats().bursts_started, 0u);
}

TEST_F(CollectionPolicyTest, BusyGpusEndTheBurst) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, true, false}};
  (void)policy.Due(jobs);
  jobs[0].gpus_idle = true;
  clock_.Advance(100);
  EXPECT_EQ(CountDue(policy, jobs, 1000, 100), 10);
  jobs[0].gpus_idle = false;
  EXPECT_EQ(CountDue(policy, jobs, 5000, 100), 5);
}

TEST_F(CollectionPolicyTest, OneBurstPerCooldown) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, true, false}};
  (void)policy.Due(jobs);
  for (int flip = 0; flip < 10; ++flip) {  // busy/idle every 30 s for 5 minutes
    jobs[0].gpus_idle = !jobs[0].gpus_idle;
    clock_.Advance(30000);
    (void)policy.Due(jobs);
  }
  EXPECT_EQ(policy.stats().bursts_started, 1u);
  // 5 minutes after the first burst's start (at 30 s), the next busy-to-idle edge bursts again.
  jobs[0].gpus_idle = false;
  clock_.Advance(30000);
  (void)policy.Due(jobs);
  jobs[0].gpus_idle = true;
  clock_.Advance(100);
  const std::vector<SampleTarget> due = policy.Due(jobs);
  ASSERT_THAT(Pids(due), ElementsAre(100));
  EXPECT_TRUE(due[0].burst);
  EXPECT_EQ(policy.stats().bursts_started, 2u);
}

TEST_F(CollectionPolicyTest, NoBurstsWhenTheirDurationIsZero) {
  CollectionPolicy policy({.burst_ms = 0}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, true, false}};
  (void)policy.Due(jobs);
  jobs[0].gpus_idle = true;
  clock_.Advance(100);
  EXPECT_EQ(CountDue(policy, jobs, 5000, 100), 5);
  EXPECT_EQ(policy.stats().bursts_started, 0u);
}

TEST_F(CollectionPolicyTest, ExpensiveSamplesLowerTheRate) {
  CollectionPolicy policy({}, &clock_);  // 1 % of a core: 10 ms of sampling per second
  const std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  for (int second = 0; second < 60; ++second) {
    for (const SampleTarget& target : policy.Due(jobs))
      policy.Record(target.pid, 40000);  // 40 ms per sample: 4 % at 1 Hz
    clock_.Advance(1000);
  }
  EXPECT_DOUBLE_EQ(policy.budget_scale(), 0.25);
  // Sampling stays within 1 % of the sliding 60 s window.
  EXPECT_LE(policy.cost_in_window_us(), 600000 + 40000);
  EXPECT_EQ(CountDue(policy, jobs, 60000, 100, 40000), 15);
  // Cheap samples bring the full rate back.
  (void)CountDue(policy, jobs, 60000, 100, 1000);
  EXPECT_DOUBLE_EQ(policy.budget_scale(), 1.0);
  EXPECT_EQ(CountDue(policy, jobs, 10000, 100, 1000), 10);
}

TEST_F(CollectionPolicyTest, SpentBudgetStopsSamplingUntilTheWindowMoves) {
  CollectionPolicy policy({.cpu_percent = 1.0, .budget_window_ms = 10000}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
  policy.Record(100, 150000);  // 150 ms: more than the 100 ms the 10 s window allows
  clock_.Advance(5000);
  EXPECT_THAT(policy.Due(jobs), IsEmpty());
  clock_.Advance(4000);
  EXPECT_THAT(policy.Due(jobs), IsEmpty());
  EXPECT_GE(policy.stats().ticks_over_budget, 2u);
  clock_.Advance(1000);  // the costly sample left the window
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
}

TEST_F(CollectionPolicyTest, FailingPidsBackOffAndAreReportedOnce) {
  CollectionPolicy policy({}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100, 101}, false, false}};
  ASSERT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 101));
  const Status denied =
      PermissionDeniedError("py_stacks: ptrace denied for pid 100: Operation not permitted")
          .WithReason("ptrace_denied");
  EXPECT_TRUE(policy.RecordError(100, denied));

  clock_.Advance(1000);
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(101));
  clock_.Advance(59000);
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100, 101));  // 60 s later, retried
  EXPECT_FALSE(policy.RecordError(100, denied));               // same failure: not reported
  const Status timeout = DeadlineExceededError("py_stacks: slow").WithReason("timeout");
  EXPECT_TRUE(policy.RecordError(100, timeout));  // a new kind of failure is
}

TEST_F(CollectionPolicyTest, LastingFailuresBackOffLonger) {
  CollectionPolicy policy({}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  (void)policy.Due(jobs);
  EXPECT_TRUE(policy.RecordError(
      100, FailedPreconditionError("py_stacks: not Python").WithReason("not_python")));
  EXPECT_EQ(CountDue(policy, jobs, 599000, 100), 0);
  clock_.Advance(1000);
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
}

TEST_F(CollectionPolicyTest, ProcessesThatLeaveAreForgotten) {
  CollectionPolicy policy({}, &clock_);
  std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  (void)policy.Due(jobs);
  const Status denied = PermissionDeniedError("denied").WithReason("ptrace_denied");
  EXPECT_TRUE(policy.RecordError(100, denied));
  (void)policy.Due({});  // the job ended
  clock_.Advance(100);
  // The pid came back (reused): sampled at once, and its failure is news again.
  EXPECT_THAT(Pids(policy.Due(jobs)), ElementsAre(100));
  EXPECT_TRUE(policy.RecordError(100, denied));
}

TEST_F(CollectionPolicyTest, RatesAreClampedToTheAllowedRange) {
  CollectionPolicy fast({.base_hz = 1000, .burst_hz = 1000}, &clock_);
  const std::vector<JobProcesses> jobs = {{"7", {100}, false, false}};
  EXPECT_EQ(CountDue(fast, jobs, 1000, 100), 10);
}

class PystackHealthTest : public ::testing::Test {
 protected:
  ManualClock clock_{kStart};
};

TEST_F(PystackHealthTest, KeepsTheLatestErrorPerReasonNewestFirst) {
  PystackHealth health(&clock_);
  EXPECT_EQ(health.Summary(), "");
  health.RecordError(
      PermissionDeniedError("py_stacks: ptrace denied for pid 1234: Operation not permitted")
          .WithReason("ptrace_denied"));
  clock_.Advance(1000);
  health.RecordError(FailedPreconditionError("py_stacks: pid 9: no Python interpreter found: x")
                         .WithReason("not_python"));
  clock_.Advance(1000);
  health.RecordError(PermissionDeniedError("py_stacks: ptrace denied for pid 1300: Permission "
                                           "Denied")
                         .WithReason("ptrace_denied"));
  EXPECT_THAT(health.Problems(),
              ElementsAre("py_stacks: ptrace denied for pid 1300: Permission Denied",
                          "py_stacks: pid 9: no Python interpreter found: x"));
  EXPECT_EQ(health.Summary(),
            "py_stacks: ptrace denied for pid 1300: Permission Denied; py_stacks: pid 9: no Python "
            "interpreter found: x");
}

TEST_F(PystackHealthTest, ExitedProcessesAreNotProblemsAndOldErrorsFade) {
  PystackHealth health(&clock_, 60000);
  health.RecordError(NotFoundError("py_stacks: pid 5 exited").WithReason("process_exited"));
  EXPECT_THAT(health.Problems(), IsEmpty());

  health.RecordError(UnavailableError("native reader: bad magic"));  // no reason, no prefix
  EXPECT_THAT(health.Problems(), ElementsAre("py_stacks: native reader: bad magic"));
  clock_.Advance(60001);
  EXPECT_THAT(health.Problems(), IsEmpty());

  health.RecordSuccess();
  EXPECT_EQ(health.last_success_ms(), kStart + 60001);
}

}  // namespace
}  // namespace collection_policy_test
}  // namespace expanse::pystack
