#include "telemetry/job_threads.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace expanse::telemetry {
namespace {

// The budget's rotation, read through a /proc of files the test writes. Reading every thread at
// every sample under the budget is what job_cgroups_test.cc checks through the job's cgroups.
class JobThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-threads-XXXXXX";
    root_ = mkdtemp(dir);
    options_.proc_root = root_;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // Thread `tid` has waited `waited_s` seconds on a run queue so far and is in `state`.
  void Thread(int tid, double waited_s, char state = 'S') {
    const std::string dir = root_ + "/" + std::to_string(tid);
    // The thread's own stat is under task/: /proc/<tid>/stat sums its whole process.
    const std::string task = dir + "/task/" + std::to_string(tid);
    std::filesystem::create_directories(task);
    std::ofstream(dir + "/schedstat") << "1000 " << static_cast<uint64_t>(waited_s * 1e9) << " 1\n";
    std::ofstream(task + "/stat") << tid << " (python3) " << state << " 1 1 1\n";
    // The process-wide file says the opposite, so that reading it would fail the tests.
    std::ofstream(dir + "/stat") << tid << " (python3) " << (state == 'D' ? 'S' : 'D') << " 1\n";
  }
  // The value of `metric` for `job` in what the buffer holds, -1 when there is none.
  static double Value(SeriesBuffer& buffer, const std::string& job, const std::string& metric) {
    return Value(buffer.Take(), job, metric);
  }
  static double Value(const std::vector<wire::SeriesRecord>& series, const std::string& job,
                      const std::string& metric) {
    double value = -1;
    for (const auto& s : series) {
      if (s.device == "job/" + job && s.metric == metric && !s.v.empty())
        value = s.v.back();
    }
    return value;
  }
  std::string root_;
  JobThreadOptions options_;
};

TEST_F(JobThreadsTest, OverTheBudgetEachThreadIsReadInTurnAndKeepsItsLastRate) {
  // Thread 10+i of job 9 waits i/10 of a core, all along; job 5's one thread never waits.
  options_.reads_per_sample = 4;
  options_.uninterruptible = false;
  const std::map<uint32_t, std::vector<int>> listed{{9, {16, 11, 12, 13, 14, 15}}, {5, {50}}};
  JobThreads threads(options_);
  SeriesBuffer buffer;
  std::vector<double> job9, job5;
  for (int t = 1; t <= 6; ++t) {
    for (int i = 1; i <= 6; ++i)
      Thread(10 + i, t * i / 10.0);
    Thread(50, 0);
    threads.Sample(listed, t * 1000, "gpu07", buffer);
    const std::vector<wire::SeriesRecord> series = buffer.Take();
    double nine = -1, five = -1;
    for (const auto& s : series) {
      if (s.metric == "job.cpu_wait_cores")
        (s.device == "job/9" ? nine : five) = s.v.back();
    }
    job9.push_back(nine);
    job5.push_back(five);
  }
  // 7 threads over a budget of 4: job 9 reads 4 * 6 / 7 = 3 a sample (11-13, then 14-16, ...),
  // job 5 its one (at least one per job). A rate needs a thread's second reading: threads 11-13
  // have one at sample 3 (0.1 + 0.2 + 0.3 cores), all six from sample 4 on (2.1).
  const std::vector<double> expected9{-1, -1, 0.6, 2.1, 2.1, 2.1};
  ASSERT_EQ(job9.size(), expected9.size());
  for (size_t i = 0; i < job9.size(); ++i)
    EXPECT_NEAR(job9[i], expected9[i], 1e-6) << "sample " << i + 1;
  EXPECT_EQ(job5, (std::vector<double>{-1, 0, 0, 0, 0, 0}));
}

TEST_F(JobThreadsTest, AThreadsLastStateStandsForItUntilItIsReadAgain) {
  options_.reads_per_sample = 2;
  options_.cpu_wait = false;
  const std::map<uint32_t, std::vector<int>> listed{{9, {1, 2, 3, 4}}};
  JobThreads threads(options_);
  SeriesBuffer buffer;
  for (int tid : {1, 2, 3, 4})
    Thread(tid, 0);
  Thread(3, 0, 'D');
  threads.Sample(listed, 1000, "gpu07", buffer);  // reads 1 and 2
  EXPECT_EQ(threads.last_reads(), 2u);
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
  threads.Sample(listed, 2000, "gpu07", buffer);  // reads 3 (blocked) and 4
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
  Thread(3, 0, 'S');
  threads.Sample(listed, 3000, "gpu07", buffer);  // reads 1 and 2: 3's last state stands
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
  threads.Sample(listed, 4000, "gpu07", buffer);  // reads 3 again
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
  // A thread that is no longer listed is forgotten with its state.
  Thread(3, 0, 'D');
  threads.Sample(listed, 5000, "gpu07", buffer);  // reads 1 and 2
  threads.Sample(listed, 6000, "gpu07", buffer);  // reads 3 (blocked) and 4
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
  threads.Sample({{9, {1, 2, 4}}}, 7000, "gpu07", buffer);  // reads 1 and 2
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
  // And a job no longer listed is forgotten whole: 4 is blocked at its turn, then the job is
  // gone for a sample (or listed without threads), then back: it starts afresh from thread 1.
  for (const std::map<uint32_t, std::vector<int>>& gone :
       {std::map<uint32_t, std::vector<int>>{}, {{9, {}}}}) {
    Thread(4, 0, 'D');
    threads.Sample({{9, {1, 2, 4}}}, 7500, "gpu07", buffer);  // two turns read all three
    threads.Sample({{9, {1, 2, 4}}}, 8000, "gpu07", buffer);
    EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
    threads.Sample(gone, 9000, "gpu07", buffer);
    EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), -1);
    threads.Sample(listed, 10'000, "gpu07", buffer);  // reads 1 and 2 (3 and 4 are blocked)
    EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
    threads.Sample({{9, {1, 2, 4}}}, 11'000, "gpu07", buffer);  // reads 4 (blocked) and 1
    Thread(4, 0, 'S');
    threads.Sample({{9, {1, 2, 4}}}, 12'000, "gpu07", buffer);  // reads 2 and 4
    EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
  }
}

// In turns, a blocked thread does not end the turn's state reads: the threads after it would
// otherwise keep an old state for another round.
TEST_F(JobThreadsTest, InTurnsEveryThreadsStateIsReadAtItsTurn) {
  options_.reads_per_sample = 2;
  options_.cpu_wait = false;
  JobThreads threads(options_);
  SeriesBuffer buffer;
  for (int tid : {1, 2, 3, 4})
    Thread(tid, 0);
  const std::map<uint32_t, std::vector<int>> listed{{9, {1, 2, 3, 4}}};
  threads.Sample(listed, 1000, "gpu07", buffer);  // reads 1 and 2
  Thread(4, 0, 'D');
  threads.Sample(listed, 2000, "gpu07", buffer);  // reads 3 and 4 (blocked)
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
  Thread(3, 0, 'D');
  Thread(4, 0, 'S');
  threads.Sample(listed, 3000, "gpu07", buffer);  // reads 1 and 2
  threads.Sample(listed, 4000, "gpu07", buffer);  // reads 3 (blocked) and 4, no longer
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 1);
  // 3 ends: what stands for 4 is what its last turn read.
  threads.Sample({{9, {1, 2, 4}}}, 5000, "gpu07", buffer);  // reads 1 and 2
  EXPECT_EQ(Value(buffer, "9", "job.uninterruptible_some"), 0);
}

TEST_F(JobThreadsTest, EachJobReadsOneThreadAndAShareOfTheRestOfTheBudget) {
  options_.reads_per_sample = 4;
  JobThreads threads(options_);
  SeriesBuffer buffer;
  std::map<uint32_t, std::vector<int>> listed{{1, {11}}, {2, {21, 22, 23, 24, 25, 26, 27, 28, 29}}};
  for (const auto& [job, tids] : listed) {
    for (int tid : tids)
      Thread(tid, 0);
  }
  // 10 threads of 2 jobs over a budget of 4: job 1 its one thread, job 2 one and 2 * 8 / 8 more.
  threads.Sample(listed, 1000, "gpu07", buffer);
  EXPECT_EQ(threads.last_reads(), 4u);
  // More jobs than the budget: one thread each, whatever they have.
  for (uint32_t job = 3; job <= 6; ++job) {
    listed[job] = {static_cast<int>(job) * 10 + 1, static_cast<int>(job) * 10 + 2};
    Thread(static_cast<int>(job) * 10 + 1, 0);
    Thread(static_cast<int>(job) * 10 + 2, 0);
  }
  threads.Sample(listed, 2000, "gpu07", buffer);
  EXPECT_EQ(threads.last_reads(), 6u);
  // Under the budget again: everything, every sample.
  options_.reads_per_sample = 1000;
  JobThreads everything(options_);
  everything.Sample(listed, 3000, "gpu07", buffer);
  EXPECT_EQ(everything.last_reads(), 18u);
  // Each job's series come every sample, whichever threads its turn read.
  buffer.Take();
  for (int64_t t = 4000; t <= 8000; t += 1000) {
    threads.Sample(listed, t, "gpu07", buffer);
    const std::vector<wire::SeriesRecord> series = buffer.Take();
    for (uint32_t job = 1; job <= 6; ++job)
      EXPECT_EQ(Value(series, std::to_string(job), "job.uninterruptible_some"), 0) << job << t;
  }
}

TEST_F(JobThreadsTest, UnderTheBudgetEveryThreadIsReadAtEverySample) {
  options_.reads_per_sample = 3;
  const std::map<uint32_t, std::vector<int>> listed{{9, {1, 2}}, {10, {3}}};
  JobThreads threads(options_);
  SeriesBuffer buffer;
  double waited_1 = 0, waited_2 = 0;
  for (int t = 1; t <= 4; ++t) {
    // Rates that change every second: a figure from older readings would not match.
    const double rate_1 = 0.1 * t, rate_2 = 0.5 / t;
    waited_1 += rate_1;
    waited_2 += rate_2;
    Thread(1, waited_1);
    Thread(2, waited_2, t == 3 ? 'D' : 'S');  // the second thread of its job
    Thread(3, t * 1.0);
    threads.Sample(listed, t * 1000, "gpu07", buffer);
    EXPECT_EQ(threads.last_reads(), 3u);
    const std::vector<wire::SeriesRecord> series = buffer.Take();
    size_t waits = 0, states = 0;
    for (const auto& s : series) {
      if (s.metric == "job.cpu_wait_cores") {
        EXPECT_NEAR(s.v.back(), s.device == "job/9" ? rate_1 + rate_2 : 1.0, 1e-6) << t;
        ++waits;
      } else if (s.metric == "job.uninterruptible_some") {
        EXPECT_EQ(s.v.back(), s.device == "job/9" && t == 3 ? 1.0 : 0.0) << s.device << t;
        ++states;
      }
    }
    EXPECT_EQ(waits, t == 1 ? 0u : 2u) << "a rate needs two readings; then one per job";
    EXPECT_EQ(states, 2u);
  }
  // Every thread new (the job's processes replaced): no interval to rate, and it waited nothing
  // that can be seen, 0, as the sampler always said; reading in turns, that would not be known.
  Thread(7, 5.0);
  Thread(8, 5.0);
  threads.Sample({{9, {7, 8}}, {10, {3}}}, 5000, "gpu07", buffer);
  EXPECT_EQ(Value(buffer, "9", "job.cpu_wait_cores"), 0);
}

// The real /proc: 100 threads of this process that sleep all along, read 32 a sample. Their
// files are where the sampler looks (a thread's own stat under /proc/<tid>/task/<tid>/, for a
// thread that is not its process's leader too), and sleeping threads wait for almost no CPU.
TEST(JobThreadsOnTheRealProcTest, ReadsAProcesssThreadsInTurns) {
  std::mutex mu;
  // Two: a sleeper woken by another's start would run (and could wait for a CPU) meanwhile.
  std::condition_variable started, stopped;
  bool stop = false;
  std::vector<int> tids;
  std::vector<std::thread> sleepers;
  for (int i = 0; i < 100; ++i) {
    sleepers.emplace_back([&] {
      std::unique_lock<std::mutex> lock(mu);
      tids.push_back(static_cast<int>(syscall(SYS_gettid)));
      started.notify_all();
      stopped.wait(lock, [&] { return stop; });
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    started.wait(lock, [&] { return tids.size() == 100; });
  }
  JobThreadOptions options;
  options.reads_per_sample = 32;
  JobThreads threads(options);
  SeriesBuffer buffer;
  std::vector<int64_t> waits_at;
  for (int64_t t = 1; t <= 6; ++t) {
    threads.Sample({{7, tids}}, t * 1000, "gpu07", buffer);
    EXPECT_EQ(threads.last_reads(), 32u);
    bool state_seen = false;
    for (const auto& s : buffer.Take()) {
      if (s.metric == "job.uninterruptible_some") {
        EXPECT_EQ(s.v, (std::vector<double>{0})) << "at " << t;
        state_seen = true;
      } else if (s.metric == "job.cpu_wait_cores") {
        // Not exactly 0: on a loaded machine a thread still on its way into its wait at its
        // first reading can have queued for a CPU for a few microseconds (the CI saw 0.0008
        // cores). Asleep, none can add up to a tenth of a core.
        ASSERT_EQ(s.v.size(), 1u);
        EXPECT_GE(s.v[0], 0.0) << "at " << t;
        EXPECT_LT(s.v[0], 0.1) << "at " << t;
        waits_at.push_back(t);
      }
    }
    EXPECT_TRUE(state_seen) << "at " << t;
  }
  // Turns of 32 over 100 threads: the fourth reads the last 4 and the first 28 again.
  EXPECT_EQ(waits_at, (std::vector<int64_t>{4, 5, 6}));
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  stopped.notify_all();
  for (auto& sleeper : sleepers)
    sleeper.join();
}

}  // namespace
}  // namespace expanse::telemetry
