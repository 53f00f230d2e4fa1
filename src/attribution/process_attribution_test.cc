#include "attribution/process_attribution.h"

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::attribution {
namespace {

using testing::Environ;
using testing::FakeProc;
using ::testing::IsEmpty;
using testing::kUuid0;
using testing::kUuid1;

constexpr std::string_view kV1Job7 =
    "5:devices:/expanse-testcluster/worker1/slurm/uid_0/job_7/step_0/task_0\n"
    "3:freezer:/expanse-testcluster/worker1/slurm/uid_0/job_7/step_0\n"
    "0::/expanse-testcluster/worker1\n";
constexpr std::string_view kOutsideAnyJob =
    "5:devices:/system.slice/mydaemon.service\n"
    "0::/system.slice/mydaemon.service\n";

gpu::GpuProcess Process(uint32_t pid, std::string_view uuid, uint64_t memory_mib) {
  return gpu::GpuProcess{pid, std::string(uuid), memory_mib};
}

AttributionOptions Options(const FakeProc& proc) {
  AttributionOptions options;
  options.proc_root = proc.root();
  return options;
}

TEST(ProcessAttributionTest, CgroupDecidesAndEnvironNamesTheArrayTask) {
  FakeProc proc;
  proc.AddProcess(100, kV1Job7,
                  Environ({"SLURM_JOB_ID=7", "SLURM_ARRAY_JOB_ID=5", "SLURM_ARRAY_TASK_ID=2",
                           "CUDA_VISIBLE_DEVICES=0"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(100, kUuid0, 1024)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  const AttributedProcess& process = result.processes[0];
  EXPECT_EQ(process.job, (SlurmJob{7, "5_2"}));
  EXPECT_EQ(process.source, JobSource::kCgroup);
  EXPECT_FALSE(process.outside_cgroup);
  EXPECT_EQ(process.step, "0");
  EXPECT_EQ(process.job_cgroup, "/expanse-testcluster/worker1/slurm/uid_0/job_7");
  EXPECT_EQ(process.cuda_visible_devices, "0");
  EXPECT_EQ(process.process.used_memory_mib, 1024u);
  EXPECT_EQ(result.counters, AttributionCounters{});
}

TEST(ProcessAttributionTest, V2CgroupAndHetJob) {
  FakeProc proc;
  proc.AddProcess(200, "0::/system.slice/slurmstepd.scope/job_124/step_0/user/task_0\n",
                  Environ({"SLURM_JOB_ID=124", "SLURM_HET_JOB_ID=123", "SLURM_HET_JOB_OFFSET=1"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(200, kUuid1, 10)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].job, (SlurmJob{124, "123+1"}));
  EXPECT_EQ(result.processes[0].source, JobSource::kCgroup);
}

TEST(ProcessAttributionTest, EnvironOfAnotherJobDoesNotOverrideTheCgroup) {
  FakeProc proc;
  proc.AddProcess(300, kV1Job7,
                  Environ({"SLURM_JOB_ID=8", "SLURM_ARRAY_JOB_ID=1", "SLURM_ARRAY_TASK_ID=1"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(300, kUuid0, 1)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].job, (SlurmJob{7, "7"}));
  EXPECT_EQ(result.processes[0].source, JobSource::kCgroup);
}

TEST(ProcessAttributionTest, ProcessThatLeftItsJobsCgroup) {
  FakeProc proc;
  proc.AddProcess(400, kOutsideAnyJob, Environ({"SLURM_JOB_ID=7", "CUDA_VISIBLE_DEVICES=0"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(400, kUuid0, 2048)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].job, (SlurmJob{7, "7"}));
  EXPECT_EQ(result.processes[0].source, JobSource::kEnviron);
  EXPECT_TRUE(result.processes[0].outside_cgroup);
  EXPECT_EQ(result.processes[0].job_cgroup, "");
}

TEST(ProcessAttributionTest, NonSlurmProcess) {
  FakeProc proc;
  proc.AddProcess(500, kOutsideAnyJob, Environ({"HOME=/root"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(500, kUuid0, 1)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].job, std::nullopt);
  EXPECT_EQ(result.processes[0].source, JobSource::kNone);
  EXPECT_FALSE(result.processes[0].outside_cgroup);
}

TEST(ProcessAttributionTest, VanishedPidIsSkippedNotAnError) {
  FakeProc proc;
  proc.AddProcess(600, kV1Job7, Environ({"SLURM_JOB_ID=7"}));
  const ProcessAttributionResult result = AttributeProcesses(
      {Process(4242, kUuid0, 1), Process(600, kUuid0, 1), Process(4242, kUuid1, 1)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].process.pid, 600u);
  EXPECT_EQ(result.counters.processes_gone, 1u);  // one pid, though on two GPUs
}

TEST(ProcessAttributionTest, OnePidOnTwoGpusIsReadOnce) {
  FakeProc proc;
  proc.AddProcess(700, kV1Job7, Environ({"SLURM_JOB_ID=7"}));
  const ProcessAttributionResult result =
      AttributeProcesses({Process(700, kUuid0, 1), Process(700, kUuid1, 2)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 2u);
  EXPECT_EQ(result.processes[1].process.gpu_uuid, kUuid1);
  EXPECT_EQ(result.processes[1].job, (SlurmJob{7, "7"}));
}

TEST(ProcessAttributionTest, PidZeroIsKeptUnattributed) {
  FakeProc proc;
  const ProcessAttributionResult result =
      AttributeProcesses({Process(0, kUuid0, 512)}, Options(proc));
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].job, std::nullopt);
  EXPECT_EQ(result.counters.processes_gone, 0u);
}

// Answers from the real files, except for paths told to fail: what a non-root reader of another
// user's environ, or a process exiting between two reads, looks like.
class FailingReader final : public FileReader {
 public:
  void Fail(const std::string& path, Status status) { failures_[path] = std::move(status); }
  Result<CappedFile> Read(const std::string& path, size_t max_bytes) const override {
    const auto it = failures_.find(path);
    if (it != failures_.end()) {
      return it->second;
    }
    return SystemFileReader().Read(path, max_bytes);
  }

 private:
  std::map<std::string, Status> failures_;
};

TEST(ProcessAttributionTest, UnreadableEnvironIsSkippedAndCounted) {
  FakeProc proc;
  proc.AddProcess(800, kV1Job7, Environ({"SLURM_JOB_ID=7"}));
  proc.AddProcess(801, kOutsideAnyJob, Environ({"SLURM_JOB_ID=7"}));
  FailingReader reader;
  for (const char* pid : {"800", "801"}) {
    reader.Fail(proc.root() + "/" + pid + "/environ",
                PermissionDeniedError("open: Permission denied").WithReason("permission_denied"));
  }
  AttributionOptions options = Options(proc);
  options.reader = &reader;
  const ProcessAttributionResult result =
      AttributeProcesses({Process(800, kUuid0, 1), Process(801, kUuid1, 1)}, options);
  ASSERT_EQ(result.processes.size(), 2u);
  // The cgroup still decides for 800; 801 can no longer be tied to a job.
  EXPECT_EQ(result.processes[0].job, (SlurmJob{7, "7"}));
  EXPECT_EQ(result.processes[0].cuda_visible_devices, std::nullopt);
  EXPECT_EQ(result.processes[1].job, std::nullopt);
  EXPECT_EQ(result.counters.environ_denied, 2u);
}

TEST(ProcessAttributionTest, ProcessExitingBetweenReads) {
  FakeProc proc;
  proc.AddProcess(900, kV1Job7, Environ({"SLURM_JOB_ID=7"}));
  FailingReader reader;
  reader.Fail(proc.root() + "/900/environ",
              NotFoundError("read: No such process").WithReason("gone"));
  AttributionOptions options = Options(proc);
  options.reader = &reader;
  const ProcessAttributionResult result = AttributeProcesses({Process(900, kUuid0, 1)}, options);
  EXPECT_THAT(result.processes, IsEmpty());
  EXPECT_EQ(result.counters.processes_gone, 1u);
}

TEST(ProcessAttributionTest, TruncatedMalformedAndUnreadable) {
  FakeProc proc;
  // SLURM_JOB_ID sits past the cap, so only the cgroup can tell.
  proc.AddProcess(1000, kV1Job7, Environ({"FILLER=" + std::string(100, 'x'), "SLURM_JOB_ID=7"}));
  proc.AddProcess(1001, "not a cgroup file\n", Environ({"SLURM_JOB_ID=oops"}));
  AttributionOptions options = Options(proc);
  options.max_environ_bytes = 64;
  const ProcessAttributionResult result =
      AttributeProcesses({Process(1000, kUuid0, 1), Process(1001, kUuid0, 1)}, options);
  ASSERT_EQ(result.processes.size(), 2u);
  EXPECT_EQ(result.processes[0].job, (SlurmJob{7, "7"}));
  EXPECT_EQ(result.processes[1].job, std::nullopt);
  EXPECT_EQ(result.counters.environ_truncated, 1u);
  EXPECT_EQ(result.counters.environ_malformed, 1u);
  EXPECT_EQ(result.counters.cgroup_malformed, 1u);
}

TEST(ProcessAttributionTest, UnreadableCgroupIsNotCalledOutside) {
  FakeProc proc;
  proc.AddProcess(1100, kV1Job7, Environ({"SLURM_JOB_ID=7"}));
  FailingReader reader;
  reader.Fail(proc.root() + "/1100/cgroup", UnavailableError("read: Input/output error"));
  AttributionOptions options = Options(proc);
  options.reader = &reader;
  const ProcessAttributionResult result = AttributeProcesses({Process(1100, kUuid0, 1)}, options);
  ASSERT_EQ(result.processes.size(), 1u);
  EXPECT_EQ(result.processes[0].source, JobSource::kEnviron);
  EXPECT_FALSE(result.processes[0].outside_cgroup);  // we could not look, so we do not claim it
  EXPECT_EQ(result.counters.cgroup_unreadable, 1u);
}

TEST(ProcessAttributionTest, SourceNames) {
  EXPECT_EQ(JobSourceName(JobSource::kNone), "none");
  EXPECT_EQ(JobSourceName(JobSource::kCgroup), "cgroup");
  EXPECT_EQ(JobSourceName(JobSource::kEnviron), "environ");
}

}  // namespace
}  // namespace expanse::attribution
