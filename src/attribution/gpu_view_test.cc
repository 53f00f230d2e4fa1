#include "attribution/gpu_view.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"
#include "attribution/devices_cgroup.h"

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;
using testing::Environ;
using testing::FakeProc;
using ::testing::IsEmpty;
using testing::kUuid0;
using testing::kUuid1;
using testing::kUuid2;
using testing::kUuid3;

AttributedProcess InJob(uint32_t pid, std::string_view uuid, uint32_t job_id, JobSource source) {
  AttributedProcess process;
  process.process = gpu::GpuProcess{pid, std::string(uuid), 100};
  process.job = JobFromNumber(job_id);
  process.source = source;
  process.outside_cgroup = source == JobSource::kEnviron;
  return process;
}

JobAllocation Allocation(uint32_t job_id, std::vector<std::string> uuids) {
  return JobAllocation{JobFromNumber(job_id), std::move(uuids), AllocationMethod::kCgroupDevices};
}

std::vector<GpuUseState> States(const NodeGpuUse& node) {
  std::vector<GpuUseState> states;
  for (const GpuUse& gpu : node.gpus) {
    states.push_back(gpu.state);
  }
  return states;
}

TEST(GpuViewTest, TwoJobsOnOneNode) {
  // Job 10 holds GPUs 0 and 1 and runs on 0 only; job 11 holds GPU 2 and runs on it; GPU 3 is
  // free.
  const NodeGpuUse node = BuildNodeGpuUse(
      testing::ReversedMinorInventory(),
      {Allocation(10, {std::string(kUuid0), std::string(kUuid1)}),
       Allocation(11, {std::string(kUuid2)})},
      {InJob(1, kUuid0, 10, JobSource::kCgroup), InJob(2, kUuid2, 11, JobSource::kCgroup)});
  EXPECT_THAT(States(node), ElementsAre(GpuUseState::kBusy, GpuUseState::kAllocatedIdle,
                                        GpuUseState::kBusy, GpuUseState::kFree));
  ASSERT_EQ(node.gpus[0].allocated_jobs.size(), 1u);
  EXPECT_EQ(node.gpus[0].allocated_jobs[0].job.job_id, 10u);
  EXPECT_EQ(node.gpus[0].index, 0u);
  EXPECT_EQ(node.gpus[0].minor, 3u);
  ASSERT_EQ(node.gpus[2].processes.size(), 1u);
  EXPECT_TRUE(node.gpus[2].processes[0].of_allocated_job);
  EXPECT_EQ(node.gpus[2].processes[0].process.process.used_memory_mib, 100u);
}

TEST(GpuViewTest, ProcessThatLeftItsCgroupOnAnUnallocatedGpu) {
  // Job 10 ended (no allocation left) but a daemonised child still holds GPU 1.
  const NodeGpuUse node = BuildNodeGpuUse(testing::ReversedMinorInventory(), {},
                                          {InJob(5, kUuid1, 10, JobSource::kEnviron)});
  EXPECT_EQ(node.gpus[1].state, GpuUseState::kUnallocatedInUse);
  ASSERT_EQ(node.gpus[1].processes.size(), 1u);
  EXPECT_TRUE(node.gpus[1].processes[0].process.outside_cgroup);
  EXPECT_FALSE(node.gpus[1].processes[0].of_allocated_job);
}

TEST(GpuViewTest, IntruderDoesNotMakeAnAllocatedGpuBusy) {
  AttributedProcess stranger;
  stranger.process = gpu::GpuProcess{9, std::string(kUuid3), 50};
  const NodeGpuUse node = BuildNodeGpuUse(testing::ReversedMinorInventory(),
                                          {Allocation(12, {std::string(kUuid3)})}, {stranger});
  EXPECT_EQ(node.gpus[3].state, GpuUseState::kAllocatedIdle);
  ASSERT_EQ(node.gpus[3].processes.size(), 1u);
  EXPECT_FALSE(node.gpus[3].processes[0].of_allocated_job);
}

TEST(GpuViewTest, AllocationFromAHookWithNoProcessEverSeen) {
  AllocationEvidence prolog;
  prolog.job = JobFromNumber(99);
  prolog.slurm_job_gpus = "0";
  NodeGpus node_gpus;
  node_gpus.inventory = testing::ReversedMinorInventory();
  node_gpus.gres = ParseGresConf("Name=gpu File=/dev/nvidia[0-3]\n", "n1").value();
  const ResolvedAllocation resolved = ResolveAllocation(prolog, node_gpus).value();
  const NodeGpuUse node = BuildNodeGpuUse(node_gpus.inventory, {resolved.allocation}, {});
  // GRES 0 is /dev/nvidia0, NVML index 3.
  EXPECT_THAT(States(node), ElementsAre(GpuUseState::kFree, GpuUseState::kFree, GpuUseState::kFree,
                                        GpuUseState::kAllocatedIdle));
  EXPECT_EQ(node.gpus[3].allocated_jobs[0].method, AllocationMethod::kSlurmJobGpus);
}

TEST(GpuViewTest, SharedGpuAndDuplicateAllocations) {
  JobAllocation from_hook = Allocation(20, {std::string(kUuid0)});
  from_hook.method = AllocationMethod::kSlurmJobGpus;
  const NodeGpuUse node = BuildNodeGpuUse(
      testing::ReversedMinorInventory(),
      {Allocation(20, {std::string(kUuid0)}), from_hook, Allocation(21, {std::string(kUuid0)})},
      {InJob(3, kUuid0, 21, JobSource::kCgroup)});
  ASSERT_EQ(node.gpus[0].allocated_jobs.size(), 2u);
  EXPECT_EQ(node.gpus[0].allocated_jobs[0].method, AllocationMethod::kCgroupDevices);
  EXPECT_EQ(node.gpus[0].state, GpuUseState::kBusy);
}

TEST(GpuViewTest, UnknownGpusAreReportedNotDropped) {
  const NodeGpuUse node =
      BuildNodeGpuUse(testing::ReversedMinorInventory(), {Allocation(30, {"GPU-gone", "GPU-gone"})},
                      {InJob(4, "GPU-gone", 30, JobSource::kCgroup)});
  EXPECT_THAT(node.allocated_unknown_gpus, ElementsAre("GPU-gone"));
  ASSERT_EQ(node.processes_on_unknown_gpus.size(), 1u);
  EXPECT_THAT(States(node), ElementsAre(GpuUseState::kFree, GpuUseState::kFree, GpuUseState::kFree,
                                        GpuUseState::kFree));
}

TEST(GpuViewTest, StateNames) {
  EXPECT_EQ(GpuUseStateName(GpuUseState::kFree), "free");
  EXPECT_EQ(GpuUseStateName(GpuUseState::kBusy), "busy");
  EXPECT_EQ(GpuUseStateName(GpuUseState::kAllocatedIdle), "allocated_idle");
  EXPECT_EQ(GpuUseStateName(GpuUseState::kUnallocatedInUse), "unallocated_in_use");
}

// The whole path on a fake node: /proc and /sys/fs/cgroup trees, a gres.conf, an inventory whose
// minors run opposite to its indices. Job 7 (cgroup v1, test-cluster prefix) holds minors 0 and 1
// and runs on minor 1; job 8 holds minor 3 and runs on it, plus a child that left its cgroup and
// sits on minor 2, which no job holds.
TEST(GpuViewTest, EndToEndOnAFakeNode) {
  const FakeProc proc;
  const testing::TempDir cgroup_root;
  const std::string job7 = "/expanse-testcluster/worker1/slurm/uid_0/job_7";
  const std::string job8 = "/expanse-testcluster/worker1/slurm/uid_1000/job_8";
  testing::WriteFile(cgroup_root.path() + "/devices" + job7 + "/devices.list",
                     "c 195:255 rwm\nc 195:0 rwm\nc 195:1 rwm\n");
  testing::WriteFile(cgroup_root.path() + "/devices" + job8 + "/devices.list",
                     "c 195:255 rwm\nc 195:3 rwm\n");
  // A step's CUDA indices count the step's GPUs, so only the UUID form is job evidence here.
  proc.AddProcess(100, "5:devices:" + job7 + "/step_0/task_0\n",
                  Environ({"SLURM_JOB_ID=7", "CUDA_VISIBLE_DEVICES=" + std::string(kUuid2)}));
  proc.AddProcess(200, "5:devices:" + job8 + "/step_batch\n",
                  Environ({"SLURM_JOB_ID=8", "SLURM_JOB_GPUS=3"}));
  proc.AddProcess(201, "5:devices:/user.slice\n0::/user.slice\n", Environ({"SLURM_JOB_ID=8"}));

  NodeGpus node_gpus;
  node_gpus.inventory = testing::ReversedMinorInventory();
  node_gpus.gres =
      ParseGresConf("NodeName=worker[1-2] Name=gpu File=/dev/nvidia[0-3]\n", "worker1").value();
  // NVML names GPUs by UUID: minor 1 is index 2, minor 3 index 0, minor 2 index 1.
  AttributionOptions options;
  options.proc_root = proc.root();
  const ProcessAttributionResult attributed =
      AttributeProcesses({gpu::GpuProcess{100, std::string(kUuid2), 4000},
                          gpu::GpuProcess{200, std::string(kUuid0), 8000},
                          gpu::GpuProcess{201, std::string(kUuid1), 300},
                          gpu::GpuProcess{999, std::string(kUuid3), 1}},
                         options);
  EXPECT_EQ(attributed.counters.processes_gone, 1u);

  std::vector<JobAllocation> allocations;
  for (const AttributedProcess& process : attributed.processes) {
    if (process.source != JobSource::kCgroup) {
      continue;
    }
    AllocationEvidence evidence;
    evidence.job = *process.job;
    evidence.devices_list = ReadJobDevicesList(cgroup_root.path(), process.job_cgroup).value();
    evidence.slurm_job_gpus = process.slurm_job_gpus;
    if (process.cuda_visible_devices && process.cuda_visible_devices->starts_with("GPU-")) {
      evidence.cuda_visible_devices = process.cuda_visible_devices;
    }
    const ResolvedAllocation resolved = ResolveAllocation(evidence, node_gpus).value();
    EXPECT_THAT(resolved.problems, IsEmpty());
    allocations.push_back(resolved.allocation);
  }
  ASSERT_EQ(allocations.size(), 2u);
  EXPECT_THAT(allocations[0].gpu_uuids, ElementsAre(kUuid2, kUuid3));  // minors 1 and 0
  EXPECT_THAT(allocations[1].gpu_uuids, ElementsAre(kUuid0));          // minor 3

  const NodeGpuUse node = BuildNodeGpuUse(node_gpus.inventory, allocations, attributed.processes);
  EXPECT_THAT(States(node), ElementsAre(GpuUseState::kBusy, GpuUseState::kUnallocatedInUse,
                                        GpuUseState::kBusy, GpuUseState::kAllocatedIdle));
  ASSERT_EQ(node.gpus[1].processes.size(), 1u);
  EXPECT_TRUE(node.gpus[1].processes[0].process.outside_cgroup);
  EXPECT_EQ(node.gpus[1].processes[0].process.job, JobFromNumber(8));
}

}  // namespace
}  // namespace expanse::attribution
