// Job usage: the batch forms (ComputeJobUsages, JobsWithUsage, what the job list uses) against
// the one-job form asking the telemetry store one question at a time, on random jobs and series.
#include "server/job_usage.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/clock.h"
#include "core/test_temp_dir.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#include "tsdb/tsdb.h"

namespace expanse::server {
namespace job_usage_test {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kSampleStepMs = 30'000;

void ExpectSameUsage(const JobUsage& a, const JobUsage& b, const std::string& job) {
  EXPECT_EQ(a.gpus_allocated, b.gpus_allocated) << job;
  EXPECT_EQ(a.gpus_active, b.gpus_active) << job;
  EXPECT_EQ(a.has_gpu_samples, b.has_gpu_samples) << job;
  // Bit for bit: the same buckets, summed in the same order.
  EXPECT_EQ(a.sm_mean, b.sm_mean) << job;
  EXPECT_EQ(a.sm_peak, b.sm_peak) << job;
  EXPECT_EQ(a.sm_active_mean, b.sm_active_mean) << job;
  EXPECT_EQ(a.tensor_active_mean, b.tensor_active_mean) << job;
  EXPECT_EQ(a.counters_source, b.counters_source) << job;
  EXPECT_EQ(a.gpu_mem_peak_mib, b.gpu_mem_peak_mib) << job;
  EXPECT_EQ(a.idle_gpu_hours, b.idle_gpu_hours) << job;
  EXPECT_EQ(a.allocated_gpu_hours, b.allocated_gpu_hours) << job;
  EXPECT_EQ(a.idle_tail_ms, b.idle_tail_ms) << job;
  EXPECT_EQ(a.cpu_efficiency, b.cpu_efficiency) << job;
  EXPECT_EQ(a.mem_efficiency, b.mem_efficiency) << job;
}

class JobUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::OpenSqliteStore({.path = ":memory:"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    auto org = store_->CreateOrganization("acme", "Acme", kT0);
    ASSERT_TRUE(org.ok()) << org.status();
    for (const char* id : {"cmp_a", "cmp_b"}) {
      store::Compute compute;
      compute.id = id;
      compute.org_id = org->id;
      compute.name = id;
      compute.type = "slurm";
      ASSERT_TRUE(store_->CreateCompute(compute).ok());
    }
    auto tsdb = tsdb::Tsdb::Open({.directory = dir_.path() + "/tsdb"}, clock_);
    ASSERT_TRUE(tsdb.ok()) << tsdb.status();
    tsdb_ = std::move(tsdb).value();
  }

  store::JobStore& jobs() { return store_->Jobs(); }

  // Samples every kSampleStepMs over [from_ms, to_ms): idle stretches (0), busy ones, a few
  // values at the threshold of activity.
  std::vector<tsdb::Sample> Samples(int64_t from_ms, int64_t to_ms, double scale) {
    std::vector<tsdb::Sample> samples;
    bool busy = random_() % 2 == 0;
    for (int64_t t = from_ms; t < to_ms; t += kSampleStepMs) {
      if (random_() % 40 == 0)
        busy = !busy;
      const double v = busy ? static_cast<double>(random_() % 1000) / 10.0
                            : (random_() % 50 == 0 ? kActiveSmPercent : 0.0);
      samples.push_back({t, v * scale});
    }
    return samples;
  }

  // Random jobs on two computes of four 4-GPU hosts, with their GPU and cgroup series, part
  // of them flushed to the chunk store, part still in memory.
  std::vector<store::JobRecord> MakeJobs(int count) {
    std::vector<store::JobRecord> records;
    std::vector<store::GpuAllocation> allocations;
    std::vector<store::JobNodeEvent> events;
    tsdb::Batch first_half, second_half;
    const auto add_series = [&](tsdb::SeriesKey key, std::vector<tsdb::Sample> samples) {
      const auto middle = samples.begin() + static_cast<long>(samples.size() / 2);
      first_half.Add(key, std::vector<tsdb::Sample>(samples.begin(), middle));
      second_half.Add(std::move(key), std::vector<tsdb::Sample>(middle, samples.end()));
    };
    for (const char* compute : {"cmp_a", "cmp_b"}) {
      for (int h = 1; h <= 4; ++h) {
        for (int g = 0; g < 4; ++g) {
          const std::string host = "node0" + std::to_string(h);
          const std::string uuid = "GPU-" + host + "-" + std::to_string(g);
          add_series({compute, host, uuid, "gpu.sm_util"}, Samples(kT0, kT0 + 14 * kHour, 1));
          add_series({compute, host, uuid, "gpu.mem_used_mib"},
                     Samples(kT0, kT0 + 14 * kHour, 800));
          if (h != 4) {  // node04 has no counter helper: CUPTI series on the others only
            add_series({compute, host, uuid, "gpu.sm_active"},
                       Samples(kT0, kT0 + 14 * kHour, 0.01));
            if (g % 2 == 0)
              add_series({compute, host, uuid, "gpu.tensor_active"},
                         Samples(kT0, kT0 + 14 * kHour, 0.01));
          }
        }
      }
    }
    for (int i = 0; i < count; ++i) {
      store::JobRecord job;
      job.compute_id = random_() % 3 == 0 ? "cmp_b" : "cmp_a";
      job.job_id = std::to_string(1000 + i);
      job.state = "COMPLETED";
      job.submit_ms = kT0 + static_cast<int64_t>(random_() % (10 * kHour));
      job.start_ms = random_() % 10 == 0 ? 0 : job.submit_ms + 1000;
      const int64_t length = 5 * kMinute + static_cast<int64_t>(random_() % (3 * kHour));
      job.end_ms = job.start_ms == 0 || random_() % 6 == 0 ? 0 : job.start_ms + length;
      job.req_cpus = random_() % 5 == 0 ? 0 : 1 + static_cast<int64_t>(random_() % 32);
      job.req_mem_mib = random_() % 5 == 0 ? 0 : 1024 * (1 + static_cast<int64_t>(random_() % 64));
      job.observed_ms = kT0;
      records.push_back(job);
      if (job.start_ms == 0)
        continue;
      const int hosts = 1 + static_cast<int>(random_() % 2);
      for (int h = 0; h < hosts; ++h) {
        const std::string host = "node0" + std::to_string(1 + (i + h) % 4);
        events.push_back({job.compute_id, job.job_id, host, "start", job.start_ms});
        if (job.end_ms != 0)
          events.push_back({job.compute_id, job.job_id, host, "end", job.end_ms});
        // Some allocations start late or end early; some hosts hold no GPU of the job.
        const int gpus = static_cast<int>(random_() % 4);
        for (int g = 0; g < gpus; ++g) {
          store::GpuAllocation a;
          a.compute_id = job.compute_id;
          a.job_id = job.job_id;
          a.host = host;
          a.gpu_uuid = "GPU-" + host + "-" + std::to_string(g);
          a.gpu_index = g;
          a.from_ms = job.start_ms + (random_() % 4 == 0 ? 10 * kMinute : 0);
          // An allocation past the job's end is cut to it; one that starts after it, skipped.
          a.to_ms = random_() % 4 == 0 ? a.from_ms + 20 * kMinute
                    : job.end_ms == 0  ? 0
                                       : std::max(job.end_ms, a.from_ms);
          allocations.push_back(a);
        }
        if (random_() % 4 != 0) {  // the job's own cgroup series on the host
          const int64_t end = job.end_ms != 0 ? job.end_ms : kT0 + 14 * kHour;
          const tsdb::SeriesKey cpu{job.compute_id, host, "job/" + job.job_id,
                                    "job.cpu_used_cores"};
          add_series(cpu, Samples(job.start_ms, end, 0.2));
          add_series({job.compute_id, host, "job/" + job.job_id, "job.mem_used_mib"},
                     Samples(job.start_ms, end, 300));
        }
      }
    }
    EXPECT_TRUE(jobs().UpsertJobs(records).ok());
    EXPECT_TRUE(jobs().PutGpuAllocations(allocations).ok());
    EXPECT_TRUE(jobs().AddNodeEvents(events).ok());
    EXPECT_TRUE(tsdb_->Append("first", first_half).ok());
    EXPECT_TRUE(tsdb_->Flush().ok());
    EXPECT_TRUE(tsdb_->Append("second", second_half).ok());
    return records;
  }

  // ComputeJobUsage of each job, the store read per job as the job page does.
  struct OneByOne {
    std::vector<std::string> hosts;
    std::vector<store::GpuAllocation> allocations;
    JobUsage usage;
  };
  OneByOne UsageOneByOne(const store::JobRecord& job, int64_t now_ms, int buckets = 120) {
    OneByOne one;
    auto allocations = jobs().GpuAllocations(job.compute_id, job.job_id);
    auto events = jobs().NodeEvents(job.compute_id, job.job_id);
    EXPECT_TRUE(allocations.ok() && events.ok());
    one.allocations = *allocations;
    one.hosts = JobHosts(job, *allocations, *events);
    auto usage = ComputeJobUsage(*tsdb_, job, *allocations, one.hosts, now_ms, buckets);
    EXPECT_TRUE(usage.ok()) << usage.status();
    one.usage = usage.ok() ? *usage : JobUsage{};
    return one;
  }

  testing::TempDir dir_;
  ManualClock clock_{kT0};
  std::mt19937_64 random_{20261202};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<tsdb::Tsdb> tsdb_;
};

TEST_F(JobUsageTest, CounterMeansWeighEveryGpuSecondAndAreUnknownWithoutCounters) {
  store::JobRecord job;
  job.compute_id = "cmp_a";
  job.job_id = "77";
  job.state = "COMPLETED";
  job.start_ms = kT0;
  job.end_ms = kT0 + 10 * kMinute;
  job.observed_ms = kT0;
  ASSERT_TRUE(jobs().UpsertJobs({job}).ok());
  std::vector<store::GpuAllocation> allocations;
  for (int g = 0; g < 2; ++g) {
    store::GpuAllocation a{};
    a.compute_id = "cmp_a";
    a.job_id = "77";
    a.host = "n1";
    a.gpu_uuid = "GPU-n1-" + std::to_string(g);
    a.gpu_index = g;
    a.from_ms = kT0;
    allocations.push_back(a);
  }
  // GPU 0: three seconds at 0.9; GPU 1: one second at 0.1. Mean over GPU-seconds: 0.7.
  tsdb::Batch batch;
  batch.Add(tsdb::SeriesKey{"cmp_a", "n1", "GPU-n1-0", "gpu.sm_active"},
            std::vector<tsdb::Sample>{{kT0 + 1000, 0.9}, {kT0 + 2000, 0.9}, {kT0 + 3000, 0.9}});
  batch.Add(tsdb::SeriesKey{"cmp_a", "n1", "GPU-n1-1", "gpu.sm_active"},
            std::vector<tsdb::Sample>{{kT0 + 1000, 0.1}});
  ASSERT_TRUE(tsdb_->Append("counters", batch).ok());
  auto usage = ComputeJobUsage(*tsdb_, job, allocations, {"n1"}, kT0 + kHour);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_DOUBLE_EQ(usage->sm_active_mean, 0.7);
  EXPECT_EQ(usage->tensor_active_mean, -1);  // no tensor counter reached the server
  EXPECT_EQ(usage->counters_source, "cupti");

  // DCGM's profiling fields count for a GPU the helper did not count, never beside it: GPU 0's
  // DCGM seconds are ignored, GPU 2's (no CUPTI) are taken.
  store::GpuAllocation third = allocations[0];
  third.gpu_uuid = "GPU-n1-2";
  third.gpu_index = 2;
  allocations.push_back(third);
  tsdb::Batch dcgm;
  dcgm.Add(tsdb::SeriesKey{"cmp_a", "n1", "GPU-n1-0", "gpu.dcgm.sm_active"},
           std::vector<tsdb::Sample>{{kT0 + 1000, 0.0}, {kT0 + 2000, 0.0}});
  dcgm.Add(tsdb::SeriesKey{"cmp_a", "n1", "GPU-n1-2", "gpu.dcgm.sm_active"},
           std::vector<tsdb::Sample>{{kT0 + 1000, 0.3}, {kT0 + 2000, 0.3}});
  dcgm.Add(tsdb::SeriesKey{"cmp_a", "n1", "GPU-n1-2", "gpu.dcgm.tensor_active"},
           std::vector<tsdb::Sample>{{kT0 + 1000, 0.2}, {kT0 + 2000, 0.4}});
  ASSERT_TRUE(tsdb_->Append("dcgm", dcgm).ok());
  usage = ComputeJobUsage(*tsdb_, job, allocations, {"n1"}, kT0 + kHour);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_DOUBLE_EQ(usage->sm_active_mean, (3 * 0.9 + 0.1 + 2 * 0.3) / 6);
  EXPECT_DOUBLE_EQ(usage->tensor_active_mean, 0.3);
  EXPECT_EQ(usage->counters_source, "cupti+dcgm");
}

// A job requeued after its node failed: the first run's GPUs on the failed node ended before
// the current run started and are not this run's GPUs.
TEST_F(JobUsageTest, ARequeuedJobsGpusAreItsCurrentRuns) {
  store::JobRecord job;
  job.compute_id = "cmp_a";
  job.job_id = "88";
  job.state = "RUNNING";
  job.start_ms = kT0 + 30 * kMinute;
  job.observed_ms = kT0;
  std::vector<store::GpuAllocation> allocations;
  // node01 failed in the first run: one GPU closed by a later job's Prolog there (after this
  // run's start), the other never closed.
  for (const auto& [host, from, to] : {std::tuple{"node01", kT0, kT0 + 40 * kMinute},
                                       {"node02", kT0 + 30 * kMinute, int64_t{0}}}) {
    for (int g = 0; g < 2; ++g) {
      store::GpuAllocation a{};
      a.compute_id = "cmp_a";
      a.job_id = "88";
      a.host = host;
      a.gpu_uuid = std::string("GPU-") + host + "-" + std::to_string(g);
      a.gpu_index = g;
      a.from_ms = from;
      a.to_ms = g == 1 && to != 0 ? 0 : to;
      allocations.push_back(a);
    }
  }
  auto usage = ComputeJobUsage(*tsdb_, job, allocations, {"node02"}, job.start_ms + kHour);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->gpus_allocated, 2);
  EXPECT_DOUBLE_EQ(usage->allocated_gpu_hours, 2.0);
}

TEST_F(JobUsageTest, JobsWithUsageEqualsTheOneJobPathOnRandomJobs) {
  const std::vector<store::JobRecord> page = MakeJobs(120);
  const int64_t now_ms = kT0 + 12 * kHour;
  const Result<std::vector<JobWithUsage>> batch = JobsWithUsage(jobs(), *tsdb_, page, now_ms);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), page.size());
  int active = 0, with_cpu = 0, idle = 0;
  for (size_t i = 0; i < page.size(); ++i) {
    const OneByOne one = UsageOneByOne(page[i], now_ms);
    EXPECT_EQ((*batch)[i].hosts, one.hosts) << page[i].job_id;
    ExpectSameUsage((*batch)[i].usage, one.usage, page[i].compute_id + "/" + page[i].job_id);
    active += one.usage.gpus_active > 0 ? 1 : 0;
    with_cpu += one.usage.cpu_efficiency >= 0 ? 1 : 0;
    idle += one.usage.idle_gpu_hours > 0 ? 1 : 0;
  }
  // The data reaches every part of the computation.
  EXPECT_GT(active, 10);
  EXPECT_GT(with_cpu, 10);
  EXPECT_GT(idle, 10);
}

// A page whose jobs hold more allocations and events than the budget: the jobs read before it
// ran out have their usage, the jobs after it are not read at all (a compute's made-up GPUs
// cannot make one page read millions of rows).
TEST_F(JobUsageTest, JobsPastThePagesRowBudgetAreNotRead) {
  const std::vector<store::JobRecord> page = MakeJobs(120);
  const int64_t now_ms = kT0 + 12 * kHour;
  const Result<std::vector<JobWithUsage>> batch =
      JobsWithUsage(jobs(), *tsdb_, page, now_ms, /*max_rows=*/1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), page.size());
  size_t rows = 0;
  for (size_t i = 0; i < kUsageJobsPerRead; ++i) {
    const OneByOne one = UsageOneByOne(page[i], now_ms);
    rows += one.allocations.size();
    EXPECT_FALSE((*batch)[i].usage_omitted) << i;
    EXPECT_EQ((*batch)[i].hosts, one.hosts) << page[i].job_id;
    ExpectSameUsage((*batch)[i].usage, one.usage, page[i].job_id);
  }
  ASSERT_GT(rows, 1u) << "the first read alone passes the budget";
  for (size_t i = kUsageJobsPerRead; i < page.size(); ++i) {
    EXPECT_TRUE((*batch)[i].usage_omitted) << i;
    EXPECT_TRUE((*batch)[i].hosts.empty()) << i;
    ExpectSameUsage((*batch)[i].usage, JobUsage{}, page[i].job_id);
  }
  // With room for them all, none is left out.
  const Result<std::vector<JobWithUsage>> all =
      JobsWithUsage(jobs(), *tsdb_, page, now_ms, /*max_rows=*/100'000);
  ASSERT_TRUE(all.ok()) << all.status();
  for (const JobWithUsage& job : *all)
    EXPECT_FALSE(job.usage_omitted);
}

TEST_F(JobUsageTest, ComputeJobUsagesEqualsComputeJobUsageForAnyBucketCount) {
  const std::vector<store::JobRecord> records = MakeJobs(40);
  for (const int buckets : {1, 7, 500}) {
    std::vector<OneByOne> ones;
    for (const store::JobRecord& job : records)
      ones.push_back(UsageOneByOne(job, kT0 + 13 * kHour, buckets));
    std::vector<JobUsageInput> inputs;
    for (size_t i = 0; i < records.size(); ++i)
      inputs.push_back({records[i], ones[i].allocations, ones[i].hosts});
    const Result<std::vector<JobUsage>> batch =
        ComputeJobUsages(*tsdb_, inputs, kT0 + 13 * kHour, buckets);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->size(), records.size());
    for (size_t i = 0; i < records.size(); ++i)
      ExpectSameUsage((*batch)[i], ones[i].usage, records[i].job_id);
  }
}

TEST_F(JobUsageTest, EmptyPageAndJobsWithoutRows) {
  EXPECT_TRUE(JobsWithUsage(jobs(), *tsdb_, {}, kT0).value().empty());
  store::JobRecord pending;
  pending.compute_id = "cmp_a";
  pending.job_id = "1";
  pending.req_cpus = 4;
  const Result<std::vector<JobWithUsage>> listed = JobsWithUsage(jobs(), *tsdb_, {pending}, kT0);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE((*listed)[0].hosts.empty());
  ExpectSameUsage((*listed)[0].usage, JobUsage{}, "pending");
}

TEST(JobHostsTest, HostsOfAllocationsAndEventsSortedOnce) {
  store::GpuAllocation a;
  a.host = "gpu02";
  a.from_ms = 1;
  store::JobNodeEvent e;
  e.host = "gpu01";
  e.at_ms = 1;
  EXPECT_THAT(JobHosts(store::JobRecord{}, {a, a}, {e, e}), ElementsAre("gpu01", "gpu02"));
}

// A requeued job's earlier run on a node that failed (its Prolog's event and its GPU, never
// closed) is not where the current run ran: with it, the job's CPUs would be spread over two
// hosts and its one real host read as saturated at half its load.
TEST(JobHostsTest, AnEarlierRunsNodeIsNotAHostOfTheJob) {
  store::JobRecord job;
  job.start_ms = 10 * 3'600'000;
  store::GpuAllocation old_gpu, gpu;
  old_gpu.host = "w1";
  old_gpu.from_ms = job.start_ms - 2 * 3'600'000;
  gpu.host = "w2";
  gpu.from_ms = job.start_ms + 1'000;
  store::JobNodeEvent old_start, start, skewed;
  old_start.host = "w1";
  old_start.at_ms = old_gpu.from_ms;
  start.host = "w2";
  start.at_ms = job.start_ms;
  skewed.host = "w3";  // its clock 4 min behind slurmctld's: still this run
  skewed.at_ms = job.start_ms - 4 * 60'000;
  EXPECT_THAT(JobHosts(job, {old_gpu, gpu}, {old_start, start, skewed}), ElementsAre("w2", "w3"));
}

}  // namespace
}  // namespace job_usage_test
}  // namespace expanse::server
