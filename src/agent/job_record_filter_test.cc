#include "agent/job_record_filter.h"

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

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

// The first time after `sent_ms` that an unchanged record of `id` is taken, in 1 s steps.
int64_t ResentAfter(JobRecordFilter& filter, const std::string& id, int64_t sent_ms) {
  for (int64_t t = sent_ms + 1'000; t <= sent_ms + 2 * kRefresh; t += 1'000) {
    const bool taken = filter.Take(Job(id, "RUNNING", t), t);
    filter.Commit(t);
    if (taken)
      return t - sent_ms;
  }
  return -1;
}

TEST(JobRecordFilter, AnUnchangedRecordWaitsForItsRefreshAfterItWasQueued) {
  JobRecordFilter filter(kRefresh);
  EXPECT_TRUE(filter.Take(Job("1", "RUNNING", 10'000), 10'000));
  filter.Commit(10'000);
  EXPECT_FALSE(filter.Take(Job("1", "RUNNING", 20'000), 20'000));
  filter.Commit(20'000);
  const int64_t first = ResentAfter(filter, "1", 10'000);
  EXPECT_GT(first, kRefresh * 3 / 4 - 1'000);
  EXPECT_LE(first, kRefresh);
  // The same wait again from the refresh, for the same job.
  EXPECT_EQ(ResentAfter(filter, "1", 10'000 + first), first);
}

// A restarted controller sends every job in one round; their refreshes must not all come due
// in one later round again.
TEST(JobRecordFilter, JobsSentTogetherAreRefreshedApart) {
  JobRecordFilter filter(kRefresh);
  for (int j = 0; j < 200; ++j)
    ASSERT_TRUE(filter.Take(Job(std::to_string(j), "RUNNING", 0), 0));
  filter.Commit(0);
  std::map<int64_t, int> due;  // second -> jobs refreshed in it
  for (int64_t t = 1'000; t <= kRefresh; t += 1'000) {
    for (int j = 0; j < 200; ++j) {
      if (filter.Take(Job(std::to_string(j), "RUNNING", t), t))
        ++due[t];
    }
    filter.Commit(t);
  }
  int refreshed = 0, busiest = 0;
  for (const auto& [t, n] : due) {
    EXPECT_GE(t, kRefresh * 3 / 4) << n << " jobs refreshed early";
    refreshed += n;
    busiest = std::max(busiest, n);
  }
  EXPECT_EQ(refreshed, 200);
  EXPECT_GE(due.size(), 10u);
  EXPECT_LE(busiest, 40);
}

TEST(JobRecordFilter, AnyFieldButTheObservationTimeIsNews) {
  JobRecordFilter filter(kRefresh);
  ASSERT_TRUE(filter.Take(Job("1", "RUNNING", 10'000), 10'000));
  filter.Commit(10'000);
  EXPECT_TRUE(filter.Take(Job("1", "COMPLETED", 20'000), 20'000));
  filter.Commit(20'000);
  EXPECT_FALSE(filter.Take(Job("1", "COMPLETED", 30'000), 30'000));
}

// Each field the record carries, changed alone, makes a different record; observed_ms does not.
TEST(JobRecordFilter, SameJobRecordComparesEveryFieldButTheObservationTime) {
  const wire::JobRecord base = Job("1", "RUNNING", 10'000);
  wire::JobRecord later = base;
  later.observed_ms = 99'000;
  EXPECT_TRUE(SameJobRecord(base, later));
  const std::vector<std::function<void(wire::JobRecord&)>> changes = {
      [](wire::JobRecord& j) { j.job_id = "2"; },
      [](wire::JobRecord& j) { j.name = "eval"; },
      [](wire::JobRecord& j) { j.user = "bo"; },
      [](wire::JobRecord& j) { j.account = "ml"; },
      [](wire::JobRecord& j) { j.partition = "big"; },
      [](wire::JobRecord& j) { j.state = "SUSPENDED"; },
      [](wire::JobRecord& j) { j.nodes = "w[1-2]"; },
      [](wire::JobRecord& j) { j.submit_ms = 5; },
      [](wire::JobRecord& j) { j.start_ms = 2'000; },
      [](wire::JobRecord& j) { j.end_ms = 9'000; },
      [](wire::JobRecord& j) { j.req_nodes = 2; },
      [](wire::JobRecord& j) { j.req_cpus = 8; },
      [](wire::JobRecord& j) { j.req_gpus = 4; },
      [](wire::JobRecord& j) { j.req_mem_mib = 1024; },
      [](wire::JobRecord& j) { j.time_limit_s = 3600; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    wire::JobRecord changed = base;
    changes[i](changed);
    EXPECT_FALSE(SameJobRecord(base, changed)) << "change " << i;
  }
  // Every field of the record but observed_ms is changed above.
  static_assert(sizeof(wire::JobRecord) == 7 * sizeof(std::string) + 9 * sizeof(int64_t),
                "a field was added to wire::JobRecord: compare it in SameJobRecord and here");
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

TEST(JobRecordFilter, BeyondItsBoundAJobsRecordsAreAllSent) {
  JobRecordFilter filter(kRefresh, /*max_jobs=*/2);
  for (const char* id : {"1", "2", "3"})
    ASSERT_TRUE(filter.Take(Job(id, "RUNNING", 0), 0));
  filter.Commit(0);
  EXPECT_EQ(filter.remembered(), 2u);
  int sent_again = 0;
  for (const char* id : {"1", "2", "3"})
    sent_again += filter.Take(Job(id, "RUNNING", 10'000), 10'000) ? 1 : 0;
  EXPECT_EQ(sent_again, 1) << "the job left unremembered, as without the filter";
}

}  // namespace
}  // namespace job_record_filter_test
}  // namespace expanse::agent
