#include "agent/job_cuda_tools.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace expanse::agent {
namespace {

constexpr char kNsightCompute[] =
    "CUDA_INJECTION64_PATH=/opt/nvidia/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/"
    "libTargetInjection64.so";

class JobCudaToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-cuda-tools-XXXXXX";
    root_ = mkdtemp(dir);
    options_.proc_root = root_;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // /proc/<pid>/environ with `vars` (NUL-separated, as the kernel shows it).
  void Environ(int pid, const std::vector<std::string>& vars) {
    std::filesystem::create_directories(root_ + "/" + std::to_string(pid));
    std::ofstream out(root_ + "/" + std::to_string(pid) + "/environ.tmp", std::ios::binary);
    for (const std::string& v : vars)
      out << v << '\0';
    out.close();
    std::filesystem::rename(root_ + "/" + std::to_string(pid) + "/environ.tmp",
                            root_ + "/" + std::to_string(pid) + "/environ");
  }
  std::string root_;
  attribution::AttributionOptions options_;
};

TEST_F(JobCudaToolsTest, AJobWithAProcessRunningAnotherCudaToolIsFound) {
  Environ(100, {"SLURM_JOB_ID=7", "PATH=/usr/bin"});
  Environ(101, {"SLURM_JOB_ID=7", kNsightCompute});
  Environ(200, {"SLURM_JOB_ID=8",
                "CUDA_INJECTION64_PATH=/srv/expanse/lib/cupti-nodes/n1/lib/libexpanse-agent.so"});
  Environ(300, {"SLURM_JOB_ID=9", "EXPANSE_YIELD_COUNTERS=1"});
  Environ(400, {"SLURM_JOB_ID=10", "EXPANSE_YIELD_COUNTERS=0"});
  JobCudaTools tools(options_);
  EXPECT_EQ(tools.Scan(1000, {{7, {100, 101}}, {8, {200}}, {9, {300}}, {10, {400}}}),
            (std::set<uint32_t>{7, 9}));
}

// A process gone, or whose environment cannot be read, runs no tool; the scan goes on.
TEST_F(JobCudaToolsTest, AnUnreadableProcessRunsNoTool) {
  Environ(101, {kNsightCompute});
  std::filesystem::create_directories(root_ + "/102/environ");  // a directory: EISDIR
  JobCudaTools tools(options_);
  EXPECT_EQ(tools.Scan(1000, {{7, {99, 102}}, {8, {101}}}), (std::set<uint32_t>{8}));
}

// A process's environment is read when it first appears, again a tick later (caught between
// fork and exec it showed its parent's), then every `recheck_ms` (an exec in place changes it
// under the same pid); a pid gone from the scan is read afresh if it comes back (reused).
TEST_F(JobCudaToolsTest, KnownProcessesAreReadAgainAfterTheRecheckInterval) {
  Environ(100, {"SLURM_JOB_ID=7"});
  JobCudaTools tools(options_, /*recheck_ms=*/10'000);
  EXPECT_TRUE(tools.Scan(1000, {{7, {100}}}).empty());
  Environ(100, {"SLURM_JOB_ID=7", kNsightCompute});  // its exec, after the first read
  EXPECT_EQ(tools.Scan(2000, {{7, {100}}}), (std::set<uint32_t>{7}));
  Environ(100, {"SLURM_JOB_ID=7"});
  EXPECT_EQ(tools.Scan(3000, {{7, {100}}}), (std::set<uint32_t>{7}));  // not read again yet
  EXPECT_TRUE(tools.Scan(12'000, {{7, {100}}}).empty());
  Environ(100, {"SLURM_JOB_ID=7", kNsightCompute});  // `exec ncu ...` in place
  EXPECT_TRUE(tools.Scan(13'000, {{7, {100}}}).empty());
  EXPECT_EQ(tools.Scan(22'000, {{7, {100}}}), (std::set<uint32_t>{7}));

  Environ(100, {"SLURM_JOB_ID=7"});
  EXPECT_TRUE(tools.Scan(23'000, {{7, {}}}).empty());     // gone
  EXPECT_TRUE(tools.Scan(24'000, {{7, {100}}}).empty());  // a new process, read at once
}

// A scan reads at most its budget; the jobs take turns and a quarter is kept for second looks,
// so a job starting many processes at once delays neither another job's new process nor the
// second look at a process caught between fork and exec.
TEST_F(JobCudaToolsTest, AScanReadsWithinItsBudgetEachJobInTurn) {
  std::vector<int> job7;
  for (int pid = 100; pid < 120; ++pid) {
    Environ(pid, {"SLURM_JOB_ID=7"});
    job7.push_back(pid);
  }
  Environ(200, {"SLURM_JOB_ID=8"});  // job 8's process, first read before its exec
  JobCudaTools tools(options_, 10'000, {.max_reads = 8});
  EXPECT_TRUE(tools.Scan(1000, {{7, job7}, {8, {200}}}).empty());  // 100, 200, 101-106
  Environ(200, {"SLURM_JOB_ID=8", kNsightCompute});                // its exec
  Environ(300, {"SLURM_JOB_ID=9", kNsightCompute});
  // Job 9's new process in turn with job 7's (6 reads), and 2 second looks: 100's and 200's,
  // each job's first in turn.
  EXPECT_EQ(tools.Scan(2000, {{7, job7}, {8, {200}}, {9, {300}}}), (std::set<uint32_t>{8, 9}));
}

}  // namespace
}  // namespace expanse::agent
