#include "attribution/allocation.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kUuid0;
using testing::kUuid1;
using testing::kUuid2;
using testing::kUuid3;

// Index 0 has minor 3, ..., index 3 has minor 0; gres.conf lists the files in minor order, so GRES
// index i is /dev/nvidia<i>, which is NVML index 3 - i.
NodeGpus ReversedNode() {
  NodeGpus node;
  node.inventory = testing::ReversedMinorInventory();
  node.gres = ParseGresConf("Name=gpu File=/dev/nvidia[0-3]\n", "n1").value();
  return node;
}

TEST(AllocationTest, DevicesListGoesThroughMinors) {
  const GpuSet set =
      GpusFromDevicesList("c 195:255 rwm\nc 195:0 rwm\nc 195:1 rwm\n", ReversedNode()).value();
  EXPECT_EQ(set.method, AllocationMethod::kCgroupDevices);
  EXPECT_THAT(set.gpu_uuids, ElementsAre(kUuid2, kUuid3));  // minors 1, 0 in inventory order
}

TEST(AllocationTest, DevicesListErrors) {
  const NodeGpus node = ReversedNode();
  const Status default_allow = GpusFromDevicesList("a *:* rwm\n", node).status();
  EXPECT_EQ(default_allow.reason(), "devices_default_allow");
  EXPECT_THAT(default_allow.message(), HasSubstr("does not list the devices it denies"));
  const Status unconstrained = GpusFromDevicesList("c 195:* rwm\nc 1:3 rw\n", node).status();
  EXPECT_EQ(unconstrained.reason(), "devices_unconstrained");
  const Status unknown = GpusFromDevicesList("c 195:7 rwm\n", node).status();
  EXPECT_EQ(unknown.message(),
            "devices.list names /dev/nvidia7, but no GPU in the inventory has minor 7");
  EXPECT_EQ(unknown.reason(), "unknown_gpu_minor");
  NodeGpus no_minors = node;
  no_minors.inventory[0].minor.reset();
  EXPECT_EQ(GpusFromDevicesList("c 195:3 rwm\n", no_minors).status().message(),
            "devices.list names /dev/nvidia3, but no GPU in the inventory has minor 3 (1 GPUs "
            "have no known minor number)");
}

TEST(AllocationTest, JobGpusGoThroughGresConf) {
  const GpuSet set = GpusFromJobGpus("0,1", ReversedNode()).value();
  EXPECT_EQ(set.method, AllocationMethod::kSlurmJobGpus);
  // GRES 0,1 = /dev/nvidia0,1 = minors 0,1 = NVML indices 3,2, never NVML 0,1.
  EXPECT_THAT(set.gpu_uuids, ElementsAre(kUuid2, kUuid3));
  EXPECT_THAT(GpusFromJobGpus("", ReversedNode()).value().gpu_uuids, IsEmpty());
}

TEST(AllocationTest, JobGpusWithFileRangeOffset) {
  // Like the test cluster's worker2: gres files nvidia[2-3], inventory minors 2 and 3.
  NodeGpus node;
  gpu::GpuInfo first;
  first.index = 0;
  first.minor = 2;
  first.uuid = kUuid0;
  gpu::GpuInfo second;
  second.index = 1;
  second.minor = 3;
  second.uuid = kUuid1;
  node.inventory = {first, second};
  node.gres =
      ParseGresConf("NodeName=worker2 Name=gpu File=/tc/worker2/dev/nvidia[2-3]\n", "worker2")
          .value();
  EXPECT_THAT(GpusFromJobGpus("1", node).value().gpu_uuids, ElementsAre(kUuid1));
  EXPECT_EQ(GpusFromJobGpus("2", node).status().message(),
            "SLURM_JOB_GPUS names GRES index 2, but gres.conf gives this node 2 gpu device files");
}

TEST(AllocationTest, JobGpusWithAutoDetectUsePciOrder) {
  NodeGpus node;
  node.inventory = testing::ReversedMinorInventory();
  // Make NVML order differ from bus order too: index 0 sits on the highest bus.
  node.inventory[0].pci_bus_id = "00000000:9A:00.0";
  node.gres = ParseGresConf("AutoDetect=nvml\n", "n1").value();
  // Bus order: index 1 (bus 02), 2 (03), 3 (04), 0 (9a).
  EXPECT_THAT(GpusFromJobGpus("0", node).value().gpu_uuids, ElementsAre(kUuid1));
  EXPECT_THAT(GpusFromJobGpus("3", node).value().gpu_uuids, ElementsAre(kUuid0));
  EXPECT_EQ(GpusFromJobGpus("4", node).status().message(),
            "SLURM_JOB_GPUS names GRES index 4, but AutoDetect finds 4 GPUs on this node");
}

TEST(AllocationTest, JobGpusErrors) {
  const NodeGpus node = ReversedNode();
  const Status past = GpusFromJobGpus("1,5", node).status();
  EXPECT_EQ(past.message(),
            "SLURM_JOB_GPUS names GRES index 5, but gres.conf gives this node 4 gpu device files");
  EXPECT_EQ(past.reason(), "gres_index_out_of_range");
  EXPECT_EQ(GpusFromJobGpus("0,x", node).status().message(),
            "SLURM_JOB_GPUS=\"0,x\": \"x\" is not a GRES index");
  EXPECT_EQ(GpusFromJobGpus("NoDevFiles", node).status().reason(), "no_device_files");
  NodeGpus no_gres = node;
  no_gres.gres = NodeGres{};
  EXPECT_EQ(GpusFromJobGpus("0", no_gres).status().message(),
            "gres.conf gives this node no gpu device files and no AutoDetect=nvml, so GRES "
            "indices name no GPU");
  NodeGpus wrong_minors = node;
  wrong_minors.gres = ParseGresConf("Name=gpu File=/dev/nvidia[4-7]\n", "n1").value();
  const Status unknown = GpusFromJobGpus("0", wrong_minors).status();
  EXPECT_EQ(unknown.message(),
            "gres.conf (GRES index 0, \"/dev/nvidia4\") names /dev/nvidia4, but no GPU in the "
            "inventory has minor 4");
  EXPECT_EQ(unknown.reason(), "unknown_gpu_minor");
}

TEST(AllocationTest, CudaVisibleDevicesUuids) {
  const NodeGpus node = ReversedNode();
  const GpuSet set = GpusFromCudaVisibleDevices(std::string(kUuid3) + "," + std::string(kUuid1),
                                                std::nullopt, node)
                         .value();
  EXPECT_EQ(set.method, AllocationMethod::kCudaVisibleUuids);
  EXPECT_THAT(set.gpu_uuids, ElementsAre(kUuid1, kUuid3));
  // CUDA takes unique prefixes, in any case.
  EXPECT_THAT(GpusFromCudaVisibleDevices("GPU-2222", std::nullopt, node).value().gpu_uuids,
              ElementsAre(kUuid2));
  EXPECT_THAT(GpusFromCudaVisibleDevices("GPU-33333333-DDDD", std::nullopt, node).value().gpu_uuids,
              ElementsAre(kUuid3));
  EXPECT_EQ(GpusFromCudaVisibleDevices("GPU-", std::nullopt, node).status().reason(),
            "cuda_visible_devices_malformed");
  EXPECT_EQ(GpusFromCudaVisibleDevices("GPU-9", std::nullopt, node).status().message(),
            "CUDA_VISIBLE_DEVICES names \"GPU-9\", which no GPU in the inventory has");
  NodeGpus similar = node;
  similar.inventory[1].uuid = "GPU-00000000-ffff-0000-0000-000000000001";
  EXPECT_EQ(GpusFromCudaVisibleDevices("GPU-0000", std::nullopt, similar).status().reason(),
            "ambiguous_gpu_uuid");
}

TEST(AllocationTest, CudaVisibleDevicesMig) {
  NodeGpus node = ReversedNode();
  node.mig_parents["MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"] = std::string(kUuid2);
  EXPECT_THAT(
      GpusFromCudaVisibleDevices("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", std::nullopt, node)
          .value()
          .gpu_uuids,
      ElementsAre(kUuid2));
  EXPECT_THAT(GpusFromCudaVisibleDevices("MIG-" + std::string(kUuid1) + "/1/0", std::nullopt, node)
                  .value()
                  .gpu_uuids,
              ElementsAre(kUuid1));
  EXPECT_EQ(GpusFromCudaVisibleDevices("MIG-aaaa", std::nullopt, node).status().reason(),
            "unknown_mig_device");
}

TEST(AllocationTest, CudaVisibleDevicesIndicesCountOverTheJobsGres) {
  const NodeGpus node = ReversedNode();
  // The job holds GRES 1 and 3 (minors 1, 3 = NVML 2, 0); CUDA index 1 is the second, GRES 3.
  const GpuSet set = GpusFromCudaVisibleDevices("1", "3,1", node).value();
  EXPECT_EQ(set.method, AllocationMethod::kCudaVisibleIndices);
  EXPECT_THAT(set.gpu_uuids, ElementsAre(kUuid0));
  EXPECT_THAT(GpusFromCudaVisibleDevices("0,1", "1,3", node).value().gpu_uuids,
              ElementsAre(kUuid0, kUuid2));
  const Status without = GpusFromCudaVisibleDevices("0", std::nullopt, node).status();
  EXPECT_EQ(without.message(),
            "CUDA_VISIBLE_DEVICES=\"0\" holds indices, which count the job's own devices; without "
            "SLURM_JOB_GPUS they name no GPU");
  EXPECT_EQ(without.reason(), "cuda_visible_devices_needs_job_gpus");
  EXPECT_EQ(GpusFromCudaVisibleDevices("2", "1,3", node).status().message(),
            "CUDA_VISIBLE_DEVICES index 2 is past the 2 GPUs of SLURM_JOB_GPUS=\"1,3\"");
  EXPECT_THAT(GpusFromCudaVisibleDevices("", std::nullopt, node).value().gpu_uuids, IsEmpty());
}

TEST(AllocationTest, ResolvePrefersTheCgroup) {
  AllocationEvidence evidence;
  evidence.job = SlurmJob{130, "123_4"};
  evidence.devices_list = "c 195:0 rwm\nc 195:1 rwm\n";
  evidence.slurm_job_gpus = "0,1";
  evidence.cuda_visible_devices = "1";
  const ResolvedAllocation resolved = ResolveAllocation(evidence, ReversedNode()).value();
  EXPECT_EQ(resolved.allocation.job, evidence.job);
  EXPECT_EQ(resolved.allocation.method, AllocationMethod::kCgroupDevices);
  EXPECT_THAT(resolved.allocation.gpu_uuids, ElementsAre(kUuid2, kUuid3));
  EXPECT_THAT(resolved.problems, IsEmpty());  // CUDA's one GPU is within the job's two
}

TEST(AllocationTest, ResolveReportsDisagreement) {
  AllocationEvidence evidence;
  evidence.job = JobFromNumber(7);
  evidence.devices_list = "c 195:0 rwm\n";
  evidence.slurm_job_gpus = "1";
  const ResolvedAllocation resolved = ResolveAllocation(evidence, ReversedNode()).value();
  EXPECT_THAT(resolved.allocation.gpu_uuids, ElementsAre(kUuid3));
  ASSERT_EQ(resolved.problems.size(), 1u);
  EXPECT_EQ(resolved.problems[0].message(), "job 7: SLURM_JOB_GPUS gives " + std::string(kUuid2) +
                                                " but the cgroup devices.list gives " +
                                                std::string(kUuid3) +
                                                "; using the cgroup devices.list");
  EXPECT_EQ(resolved.problems[0].reason(), "allocation_sources_disagree");
}

TEST(AllocationTest, ResolveFallsBackAndKeepsTheReason) {
  AllocationEvidence evidence;
  evidence.job = JobFromNumber(7);
  evidence.devices_list = "a *:* rwm\n";
  evidence.slurm_job_gpus = "2";
  const ResolvedAllocation resolved = ResolveAllocation(evidence, ReversedNode()).value();
  EXPECT_EQ(resolved.allocation.method, AllocationMethod::kSlurmJobGpus);
  EXPECT_THAT(resolved.allocation.gpu_uuids, ElementsAre(kUuid1));
  ASSERT_EQ(resolved.problems.size(), 1u);
  EXPECT_EQ(resolved.problems[0].reason(), "devices_default_allow");
  EXPECT_TRUE(resolved.problems[0].message().starts_with("job 7: devices.list is"));
}

TEST(AllocationTest, ResolveFromAHookEventAlone) {
  // A Prolog event: no process, no cgroup read, only the variables SLURM gave the hook.
  AllocationEvidence evidence;
  evidence.job = JobFromNumber(42);
  evidence.slurm_job_gpus = "3";
  evidence.cuda_visible_devices = "0";
  const ResolvedAllocation resolved = ResolveAllocation(evidence, ReversedNode()).value();
  EXPECT_EQ(resolved.allocation.method, AllocationMethod::kSlurmJobGpus);
  EXPECT_THAT(resolved.allocation.gpu_uuids, ElementsAre(kUuid0));
  EXPECT_THAT(resolved.problems, IsEmpty());
}

TEST(AllocationTest, ResolveErrors) {
  AllocationEvidence evidence;
  evidence.job = JobFromNumber(9);
  const Status none = ResolveAllocation(evidence, ReversedNode()).status();
  EXPECT_EQ(none.code(), StatusCode::kNotFound);
  EXPECT_EQ(none.reason(), "no_allocation_evidence");
  evidence.slurm_job_gpus = "5";
  evidence.cuda_visible_devices = "0";
  const Status inconsistent = ResolveAllocation(evidence, ReversedNode()).status();
  EXPECT_EQ(inconsistent.message(),
            "job 9: SLURM_JOB_GPUS names GRES index 5, but gres.conf gives this node 4 gpu device "
            "files");
  EXPECT_EQ(inconsistent.reason(), "gres_index_out_of_range");
}

TEST(AllocationTest, MethodNames) {
  EXPECT_EQ(AllocationMethodName(AllocationMethod::kCgroupDevices), "cgroup_devices");
  EXPECT_EQ(AllocationMethodName(AllocationMethod::kSlurmJobGpus), "slurm_job_gpus");
  EXPECT_EQ(AllocationMethodName(AllocationMethod::kCudaVisibleUuids), "cuda_visible_devices_uuid");
  EXPECT_EQ(AllocationMethodName(AllocationMethod::kCudaVisibleIndices),
            "cuda_visible_devices_index");
}

}  // namespace
}  // namespace expanse::attribution
