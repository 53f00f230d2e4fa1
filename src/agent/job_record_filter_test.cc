#include "agent/job_record_filter.h"

#include <gtest/gtest.h>

namespace expanse::agent {
namespace job_record_filter_test {
namespace {

wire::JobRecord Job(const std::string& id, const std::string& state, int64_t observed_ms) {
  wire::JobRecord job;
  job.job_id = id;
  job.name = "train";
  job.user = "ana";
  job.state = state;
  job.nodes = "w1";
  job.start_ms = 1'000;
  job.req_gpus = 1;
  job.observed_ms = observed_ms;
  return job;
}

constexpr int64_t kRefresh = 60'000;

TEST(JobRecordFilter, AnUnchangedRecordWaitsForTheRefreshAfterItWasQueued) {
  JobRecordFilter filter(kRefresh);
  EXPECT_TRUE(filter.Take(Job("1", "RUNNING", 10'000), 10'000));
  filter.Commit(10'000);
  EXPECT_FALSE(filter.Take(Job("1", "RUNNING", 20'000), 20'000));
  filter.Commit(20'000);
  EXPECT_FALSE(filter.Take(Job("1", "RUNNING", 69'999), 69'999));
  filter.Commit(69'999);
  EXPECT_TRUE(filter.Take(Job("1", "RUNNING", 70'000), 70'000));
  filter.Commit(70'000);
  EXPECT_FALSE(filter.Take(Job("1", "RUNNING", 80'000), 80'000));
}

TEST(JobRecordFilter, AnyFieldButTheObservationTimeIsNews) {
  JobRecordFilter filter(kRefresh);
  ASSERT_TRUE(filter.Take(Job("1", "RUNNING", 10'000), 10'000));
  filter.Commit(10'000);
  wire::JobRecord ended = Job("1", "COMPLETED", 20'000);
  EXPECT_TRUE(filter.Take(ended, 20'000));
  filter.Commit(20'000);
  ended.end_ms = 19'000;  // sacct's record of the same end, with its time
  EXPECT_TRUE(filter.Take(ended, 30'000));
  wire::JobRecord renamed = Job("1", "COMPLETED", 30'000);
  renamed.name = "train-2";
  EXPECT_TRUE(SameJobRecord(Job("1", "RUNNING", 1), Job("1", "RUNNING", 2)));
  EXPECT_FALSE(SameJobRecord(renamed, Job("1", "COMPLETED", 30'000)));
}

// squeue and sacct may list one job in the same round.
TEST(JobRecordFilter, TheSameRecordTwiceInARoundIsTakenOnce) {
  JobRecordFilter filter(kRefresh);
  EXPECT_TRUE(filter.Take(Job("1", "COMPLETING", 10'000), 10'000));
  EXPECT_FALSE(filter.Take(Job("1", "COMPLETING", 10'000), 10'000));
  EXPECT_TRUE(filter.Take(Job("1", "COMPLETED", 10'000), 10'000));
  filter.Commit(10'000);
  EXPECT_FALSE(filter.Take(Job("1", "COMPLETED", 20'000), 20'000)) << "the last one was noted";
}

TEST(JobRecordFilter, ARoundWhoseBatchWasNotQueuedSendsItsRecordsAgain) {
  JobRecordFilter filter(kRefresh);
  EXPECT_TRUE(filter.Take(Job("1", "RUNNING", 10'000), 10'000));
  filter.Abandon();
  EXPECT_TRUE(filter.Take(Job("1", "RUNNING", 20'000), 20'000));
  filter.Commit(20'000);
  EXPECT_TRUE(filter.Take(Job("1", "COMPLETED", 30'000), 30'000));
  filter.Abandon();
  EXPECT_TRUE(filter.Take(Job("1", "COMPLETED", 40'000), 40'000))
      << "compared with what was queued, not with what a failed round took";
}

TEST(JobRecordFilter, JobsNoLongerListedAreForgotten) {
  JobRecordFilter filter(kRefresh);
  ASSERT_TRUE(filter.Take(Job("1", "RUNNING", 0), 0));
  ASSERT_TRUE(filter.Take(Job("2", "RUNNING", 0), 0));
  filter.Commit(0);
  // Job 1 is listed every round (unchanged: not sent, but remembered); job 2 is gone.
  for (int64_t t = 10'000; t < 2 * kRefresh; t += 10'000) {
    filter.Take(Job("1", "RUNNING", t), t);
    filter.Commit(t);
  }
  EXPECT_EQ(filter.remembered(), 2u);
  filter.Take(Job("1", "RUNNING", 2 * kRefresh), 2 * kRefresh);
  filter.Commit(2 * kRefresh);
  EXPECT_EQ(filter.remembered(), 1u);
  // A job SLURM lists again after it was forgotten is news.
  EXPECT_TRUE(filter.Take(Job("2", "RUNNING", 2 * kRefresh + 1), 2 * kRefresh + 1));
}

}  // namespace
}  // namespace job_record_filter_test
}  // namespace expanse::agent
