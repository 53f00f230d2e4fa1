#include "telemetry/job_cgroups.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace expanse::telemetry {
namespace {

class JobCgroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-cgroups-XXXXXX";
    root_ = mkdtemp(dir);
    options_.cgroup_root = root_;
    options_.proc_stat = root_ + "/stat";
    options_.threads.proc_root = root_ + "/proc";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  static const wire::SeriesRecord* Find(const std::vector<wire::SeriesRecord>& series,
                                        const std::string& device, const std::string& metric) {
    for (const auto& s : series) {
      if (s.device == device && s.metric == metric)
        return &s;
    }
    return nullptr;
  }
  std::string root_;
  JobCgroupOptions options_;
};

TEST_F(JobCgroupsTest, CgroupV1JobsUnderAnyPrefix) {
  // The test cluster's layout: a per-host prefix above slurm/uid_0.
  const std::string cpu = "/cpu,cpuacct/expanse-testcluster/worker1/slurm/uid_0/job_7";
  const std::string mem = "/memory/expanse-testcluster/worker1/slurm/uid_0/job_7";
  Write(cpu + "/cpuacct.usage", "1000000000\n");
  Write(cpu + "/step_0/cpuacct.usage", "5\n");  // steps are not jobs
  Write(mem + "/memory.usage_in_bytes", "209715200\n");
  Write("/memory/other/job_9/memory.usage_in_bytes", "1\n");  // not under uid_<n>
  const std::string devices = "/devices/expanse-testcluster/worker1/slurm/uid_0/job_7";
  Write(devices + "/devices.list", "c 195:1 rwm\n");
  Write("/stat", "cpu  100 0 100 800 0 0 0 0 0 0\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "worker1", buffer);
  ASSERT_EQ(cgroups.jobs().size(), 1u);
  // The device whitelist's directory, for the attribution self-check (agent/job_devices_check.h).
  EXPECT_EQ(cgroups.jobs().at(7).devices, root_ + devices);
  Write(cpu + "/cpuacct.usage", "3000000000\n");        // 2 CPU-seconds more in 1 s
  Write("/stat", "cpu  200 0 200 1400 0 0 0 0 0 0\n");  // 200 busy of 800
  cgroups.Sample(2000, "worker1", buffer);
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* cores = Find(series, "job/7", "job.cpu_used_cores");
  ASSERT_NE(cores, nullptr);
  EXPECT_EQ(cores->v, (std::vector<double>{2.0}));
  const wire::SeriesRecord* memory = Find(series, "job/7", "job.mem_used_mib");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->v, (std::vector<double>{200.0, 200.0}));
  const wire::SeriesRecord* node = Find(series, "", "node.cpu_util");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->v, (std::vector<double>{25.0}));
}

// A job's processes live in its step and task cgroups below the job directory.
TEST_F(JobCgroupsTest, PidsOfAJobIncludeItsStepsAndTasks) {
  const std::string job = "/system.slice/slurmstepd.scope/job_42";
  Write(job + "/cpu.stat", "usage_usec 1\n");
  Write(job + "/memory.current", "1\n");
  Write(job + "/cgroup.procs", "");
  Write(job + "/step_batch/user/task_0/cgroup.procs", "100\n101\n");
  Write(job + "/step_0/user/task_0/cgroup.procs", "200\n101\n");
  Write(job + "/step_0/user/task_0/deeper/deeper/deeper/cgroup.procs", "999\n");  // too deep
  Write("/system.slice/slurmstepd.scope/job_43/cgroup.procs", "300\n");
  JobCgroups cgroups(options_);
  cgroups.Rescan();
  std::vector<int> pids = cgroups.Pids(42);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<int>{100, 101, 200}));
  EXPECT_EQ(cgroups.Pids(42, 2).size(), 2u);
  EXPECT_TRUE(cgroups.Pids(7).empty());
}

TEST_F(JobCgroupsTest, CgroupV2AndVanishingJobs) {
  const std::string job = "/system.slice/slurmstepd.scope/job_42";
  Write(job + "/cpu.stat", "usage_usec 1000000\nuser_usec 1\n");
  Write(job + "/memory.current", "1048576\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  Write(job + "/cpu.stat", "usage_usec 1500000\n");
  cgroups.Sample(2000, "gpu07", buffer);
  std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* cores = Find(series, "job/42", "job.cpu_used_cores");
  ASSERT_NE(cores, nullptr);
  EXPECT_EQ(cores->v, (std::vector<double>{0.5}));
  std::filesystem::remove_all(root_ + job);
  cgroups.Sample(3000, "gpu07", buffer);  // gone: no sample, rescanned
  EXPECT_TRUE(cgroups.jobs().empty());
  EXPECT_TRUE(buffer.Take().empty());
}

TEST_F(JobCgroupsTest, CgroupV2IoPressureIsTheShareOfEachIntervalStalledOnIo) {
  const std::string job = "/system.slice/slurmstepd.scope/job_42";
  Write(job + "/cpu.stat", "usage_usec 1000000\n");
  Write(job + "/memory.current", "1048576\n");
  Write(job + "/io.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=5000000\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(10'000, "gpu07", buffer);  // the first reading: no rate yet
  EXPECT_EQ(Find(buffer.Take(), "job/42", "job.io_pressure_some"), nullptr);
  // 10 s later: 4 s with some task stalled, 1 s with all of them.
  Write(job + "/io.pressure",
        "some avg10=40.00 avg60=0.00 avg300=0.00 total=9000000\n"
        "full avg10=10.00 avg60=0.00 avg300=0.00 total=2000000\n");
  cgroups.Sample(20'000, "gpu07", buffer);
  std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* some = Find(series, "job/42", "job.io_pressure_some");
  const wire::SeriesRecord* full = Find(series, "job/42", "job.io_pressure_full");
  ASSERT_NE(some, nullptr);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(some->v, (std::vector<double>{0.4}));
  EXPECT_EQ(full->v, (std::vector<double>{0.1}));
  // A total that went backwards (the cgroup was remade under the same id) gives no point, and a
  // file without a "full" line (or garbage) is no reading at all.
  Write(job + "/io.pressure", "some avg10=0 avg60=0 avg300=0 total=1\nfull total=1\n");
  cgroups.Sample(30'000, "gpu07", buffer);
  EXPECT_EQ(Find(buffer.Take(), "job/42", "job.io_pressure_some"), nullptr);
  Write(job + "/io.pressure", "some avg10=0 total=abc\n");
  cgroups.Sample(40'000, "gpu07", buffer);
  cgroups.Sample(50'000, "gpu07", buffer);
  EXPECT_EQ(Find(buffer.Take(), "job/42", "job.io_pressure_some"), nullptr);
}

TEST_F(JobCgroupsTest, CpuWaitIsTheRunQueueTimeOfTheJobsThreads) {
  // v1: the threads of the job and of its steps are in `tasks`.
  const std::string job = "/cpuacct/slurm/uid_0/job_9";
  Write(job + "/cpuacct.usage", "1000\n");
  Write("/memory/slurm/uid_0/job_9/memory.usage_in_bytes", "1\n");
  Write(job + "/tasks", "100\n");
  Write(job + "/step_0/tasks", "101\n102\n");
  Write("/proc/100/schedstat", "5000000000 1000000000 10\n");
  Write("/proc/101/schedstat", "5000000000 2000000000 10\n");
  Write("/proc/102/schedstat", "5000000000 9000000000 10\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(10'000, "gpu07", buffer);  // the first reading: no rate yet
  EXPECT_EQ(Find(buffer.Take(), "job/9", "job.cpu_wait_cores"), nullptr);
  // 2 s later: thread 100 waited 1 s, 101 waited 2 s; 102's counter went back (another thread
  // under a reused id) and 103 is new: neither counts.
  Write(job + "/step_0/tasks", "101\n102\n103\n");
  Write("/proc/100/schedstat", "6000000000 2000000000 12\n");
  Write("/proc/101/schedstat", "6000000000 4000000000 12\n");
  Write("/proc/102/schedstat", "6000000000 1 12\n");
  Write("/proc/103/schedstat", "6000000000 7000000000 12\n");
  cgroups.Sample(12'000, "gpu07", buffer);
  std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* wait = Find(series, "job/9", "job.cpu_wait_cores");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->v, (std::vector<double>{1.5}));
  // A thread whose schedstat is unreadable (it ended) is left out, not read as zero.
  std::filesystem::remove(root_ + "/proc/101/schedstat");
  Write("/proc/100/schedstat", "7000000000 2500000000 13\n");
  cgroups.Sample(13'000, "gpu07", buffer);
  wait = Find(series = buffer.Take(), "job/9", "job.cpu_wait_cores");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->v, (std::vector<double>{0.5}));
}

TEST_F(JobCgroupsTest, CpuWaitUnderV2ReadsCgroupThreads) {
  const std::string job = "/system.slice/slurmstepd.scope/job_42";
  Write(job + "/cpu.stat", "usage_usec 1\n");
  Write(job + "/memory.current", "1\n");
  Write(job + "/tasks", "999\n");  // not a v2 file: ignored
  Write(job + "/step_0/user/task_0/cgroup.threads", "200\n");
  Write("/proc/200/schedstat", "1 0 1\n");
  Write("/proc/999/schedstat", "1 0 1\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  Write("/proc/200/schedstat", "1 250000000 2\n");
  Write("/proc/999/schedstat", "1 900000000 2\n");
  cgroups.Sample(2000, "gpu07", buffer);
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* wait = Find(series, "job/42", "job.cpu_wait_cores");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->v, (std::vector<double>{0.25}));
}

TEST_F(JobCgroupsTest, UninterruptibleSomeSaysWhetherAThreadOfTheJobWasBlocked) {
  const std::string job = "/cpuacct/slurm/uid_0/job_9";
  Write(job + "/cpuacct.usage", "1000\n");
  Write("/memory/slurm/uid_0/job_9/memory.usage_in_bytes", "1\n");
  Write(job + "/tasks", "100\n");
  Write(job + "/step_0/tasks", "101\n102\n");
  // A thread may name itself anything: ") D (" inside its name is not its state.
  Write("/proc/100/task/100/stat", "100 (python3) S 1 100 100 0 -1\n");
  Write("/proc/101/task/101/stat", "101 (evil) D (x) S 100 100 100 0 -1\n");
  for (const char* tid : {"100", "101", "102"})
    Write(std::string("/proc/") + tid + "/schedstat", "1 0 1\n");
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* some = Find(series, "job/9", "job.uninterruptible_some");
  ASSERT_NE(some, nullptr);
  EXPECT_EQ(some->v, (std::vector<double>{0}));
  // A reader waiting on its file system (102 has no stat, as if it ended: left out).
  Write("/proc/101/task/101/stat", "101 (pt_data_worker) D 100 100 100 0 -1\n");
  Write("/proc/102/schedstat", "1 1000000000 2\n");
  cgroups.Sample(2000, "gpu07", buffer);
  some = Find(series = buffer.Take(), "job/9", "job.uninterruptible_some");
  ASSERT_NE(some, nullptr);
  EXPECT_EQ(some->v, (std::vector<double>{1}));
  // Finding 101 blocked ends the state reads, not the run-queue reads: 102's wait counts.
  const wire::SeriesRecord* wait = Find(series, "job/9", "job.cpu_wait_cores");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->v, (std::vector<double>{1}));
  // No thread's state readable (or no line a state can be found in): no sample, not 0.
  std::filesystem::remove(root_ + "/proc/101/task/101/stat");
  Write("/proc/100/task/100/stat", "100 (python3 S 1\n");
  cgroups.Sample(3000, "gpu07", buffer);
  EXPECT_EQ(Find(buffer.Take(), "job/9", "job.uninterruptible_some"), nullptr);
  // Turned off: never read.
  options_.threads.uninterruptible = false;
  Write("/proc/100/task/100/stat", "100 (python3) D 1\n");
  JobCgroups off(options_);
  off.Sample(4000, "gpu07", buffer);
  EXPECT_EQ(Find(buffer.Take(), "job/9", "job.uninterruptible_some"), nullptr);
}

TEST_F(JobCgroupsTest, CgroupV1HasNoIoPressureSeries) {
  const std::string job = "/cpuacct/slurm/uid_0/job_9";
  Write(job + "/cpuacct.usage", "1000\n");
  Write("/memory/slurm/uid_0/job_9/memory.usage_in_bytes", "1\n");
  Write(job + "/io.pressure", "some total=1\nfull total=1\n");  // not read under v1
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  cgroups.Sample(2000, "gpu07", buffer);
  std::vector<wire::SeriesRecord> series = buffer.Take();
  ASSERT_NE(Find(series, "job/9", "job.cpu_used_cores"), nullptr);
  EXPECT_EQ(Find(series, "job/9", "job.io_pressure_some"), nullptr);
}

TEST_F(JobCgroupsTest, IdleNodeIsNotWalkedEverySample) {
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);  // the first sample walks
  Write("/memory/slurm/uid_0/job_5/memory.usage_in_bytes", "1048576\n");
  cgroups.Sample(2000, "gpu07", buffer);
  EXPECT_TRUE(cgroups.jobs().empty());  // no walk yet: the node had no jobs a second ago
  cgroups.RequestRescan();              // a Prolog event announced a job
  cgroups.Sample(3000, "gpu07", buffer);
  EXPECT_EQ(cgroups.jobs().size(), 1u);
}

// As in the test cluster: the Prolog's event arrives before slurmstepd has made the job's
// directory, then the directory comes without its memory controller, then with it.
TEST_F(JobCgroupsTest, AnExpectedJobIsLookedForAtEverySampleUntilItsDirectoryIsComplete) {
  options_.rescan_every = 30;
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  cgroups.ExpectJob(42);
  cgroups.Sample(2000, "gpu07", buffer);  // not there yet
  EXPECT_TRUE(cgroups.jobs().empty());
  const std::string job = "/system.slice/slurmstepd.scope/job_42";
  Write(job + "/cpu.stat", "usage_usec 1000000\n");
  cgroups.Sample(3000, "gpu07", buffer);  // there, without memory.current
  ASSERT_EQ(cgroups.jobs().size(), 1u);
  EXPECT_TRUE(cgroups.jobs().at(42).memory.empty());
  Write(job + "/memory.current", "1048576\n");
  cgroups.Sample(4000, "gpu07", buffer);
  EXPECT_EQ(cgroups.jobs().at(42).memory, root_ + job);
  Write(job + "/cpu.stat", "usage_usec 2000000\n");
  cgroups.Sample(5000, "gpu07", buffer);  // the second reading of its CPU: a rate
  const std::vector<wire::SeriesRecord> series = buffer.Take();
  const wire::SeriesRecord* cores = Find(series, "job/42", "job.cpu_used_cores");
  ASSERT_NE(cores, nullptr);
  EXPECT_EQ(cores->v, (std::vector<double>{1.0}));

  // Found: no more walks at every sample.
  Write("/system.slice/slurmstepd.scope/job_43/cpu.stat", "usage_usec 1\n");
  Write("/system.slice/slurmstepd.scope/job_43/memory.current", "1\n");
  cgroups.Sample(6000, "gpu07", buffer);
  EXPECT_FALSE(cgroups.jobs().contains(43));
}

TEST_F(JobCgroupsTest, AnExpectedJobThatNeverComesIsLookedForOnlyAWhile) {
  options_.rescan_every = 5;
  JobCgroups cgroups(options_);
  SeriesBuffer buffer;
  cgroups.Sample(1000, "gpu07", buffer);
  cgroups.ExpectJob(42);  // e.g. a node of the allocation where the job runs no task
  for (int i = 0; i < 5; ++i)
    cgroups.Sample(2000 + i * 1000, "gpu07", buffer);
  Write("/system.slice/slurmstepd.scope/job_7/cpu.stat", "usage_usec 1\n");
  Write("/system.slice/slurmstepd.scope/job_7/memory.current", "1\n");
  cgroups.Sample(8000, "gpu07", buffer);  // given up on 42: the usual walk every 5 samples
  EXPECT_TRUE(cgroups.jobs().empty());
}

}  // namespace
}  // namespace expanse::telemetry
