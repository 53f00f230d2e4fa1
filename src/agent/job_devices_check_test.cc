#include "agent/job_devices_check.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::agent {
namespace job_devices_check_test {
namespace {

using attribution::testing::kUuid0;
using attribution::testing::kUuid1;
using attribution::testing::kUuid2;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1'800'000'000'000;

// devices.list files by path; a path that is not here is gone (ENOENT).
class FakeReader : public attribution::FileReader {
 public:
  std::map<std::string, Result<attribution::CappedFile>> files;
  Result<attribution::CappedFile> Read(const std::string& path, size_t) const override {
    auto it = files.find(path);
    if (it == files.end())
      return NotFoundError("no such file: " + path).WithReason("gone");
    return it->second;
  }
};

class JobDevicesCheckTest : public ::testing::Test {
 protected:
  JobDevicesCheckTest() { node_.inventory = attribution::testing::ReversedMinorInventory(); }

  // Job `id` allocated `uuids` by its Prolog `age_ms` ago; its v1 devices cgroup is
  // /cg/job_<id> when `devices_list` is given.
  void AddJob(uint32_t id, std::vector<std::string_view> uuids, const char* devices_list,
              int64_t age_ms = 60'000) {
    const std::string job = std::to_string(id);
    for (std::string_view uuid : uuids) {
      open_["worker1/" + job].push_back({.job_id = job,
                                         .host = "worker1",
                                         .gpu_uuid = std::string(uuid),
                                         .from_ms = kNow - age_ms,
                                         .slurm_job_id = id});
    }
    if (devices_list != nullptr) {
      dirs_[id].devices = "/cg/job_" + job;
      reader_.files.emplace("/cg/job_" + job + "/devices.list",
                            attribution::CappedFile{devices_list, false});
    }
  }
  std::vector<JobDevicesCheck> Check() {
    return CheckJobDevices(open_, dirs_, node_, kNow, reader_);
  }

  attribution::NodeGpus node_;
  std::map<std::string, std::vector<wire::GpuAllocationRecord>> open_;
  std::map<uint32_t, telemetry::JobCgroups::JobDirs> dirs_;
  FakeReader reader_;
};

// The reversed inventory: index 0 has minor 3, index 1 minor 2, index 2 minor 1.
TEST_F(JobDevicesCheckTest, AWhitelistOfExactlyTheAllocatedGpusAgrees) {
  AddJob(7, {kUuid0, kUuid1}, "c 195:255 rw\nc 195:254 rw\nc 195:2 rwm\nc 195:3 rwm\n");
  const std::vector<JobDevicesCheck> checks = Check();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].job_id, "7");
  EXPECT_EQ(checks[0].state, JobDevicesState::kAgrees);
  EXPECT_THAT(checks[0].cgroup_gpus, ElementsAre(kUuid0, kUuid1));
}

TEST_F(JobDevicesCheckTest, AnExtraOrMissingGpuDisagreesAndNamesWhatTheCgroupAllows) {
  AddJob(7, {kUuid0}, "c 195:3 rwm\nc 195:1 rwm\n");  // kUuid2 added by hand
  AddJob(8, {kUuid0, kUuid1}, "c 195:3 rwm\n");       // gres.conf names one GPU too few
  const std::vector<JobDevicesCheck> checks = Check();
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].state, JobDevicesState::kDisagrees);
  EXPECT_THAT(checks[0].cgroup_gpus, ElementsAre(kUuid0, kUuid2));
  EXPECT_EQ(checks[1].state, JobDevicesState::kDisagrees);
  EXPECT_THAT(checks[1].cgroup_gpus, ElementsAre(kUuid0));
}

TEST_F(JobDevicesCheckTest, AWhitelistGrantingEveryGpuIsUnconstrained) {
  AddJob(7, {kUuid0}, "c 1:3 rwm\nc 195:* rwm\n");
  const std::vector<JobDevicesCheck> checks = Check();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].state, JobDevicesState::kUnconstrained);
  EXPECT_THAT(checks[0].detail, HasSubstr("grants every NVIDIA device"));
}

TEST_F(JobDevicesCheckTest, WhatCannotBeComparedSaysWhy) {
  AddJob(1, {kUuid0}, "c 195:3 rwm\n", /*age_ms=*/2'000);  // slurmstepd may not have written it
  AddJob(2, {kUuid0}, nullptr);                            // no cgroup found
  AddJob(3, {kUuid0}, nullptr);
  dirs_[3].v2 = true;
  AddJob(4, {kUuid0}, nullptr);
  dirs_[4].cpu = "/cg/cpu/job_4";        // v1 without a devices cgroup
  AddJob(5, {kUuid0}, "c 195:9 rwm\n");  // a minor no GPU has
  AddJob(6, {kUuid0}, "c 195:3 rwm\n");
  reader_.files.insert_or_assign("/cg/job_6/devices.list",
                                 PermissionDeniedError("denied").WithReason("permission_denied"));
  AddJob(7, {kUuid0}, "c 195:3 rwm\n");
  reader_.files.erase("/cg/job_7/devices.list");  // the job ended since the walk
  AddJob(8, {kUuid0}, "c 195:3 rwm\n");
  reader_.files.insert_or_assign("/cg/job_8/devices.list", attribution::CappedFile{"c 1", true});
  // SLURM 21.08 and later on cgroup v1: the other GPUs are denied, and the list shows none of it.
  AddJob(9, {kUuid0}, "a *:* rwm\n");
  const std::vector<JobDevicesCheck> checks = Check();
  ASSERT_EQ(checks.size(), 9u);
  EXPECT_EQ(checks[0].state, JobDevicesState::kNotChecked);
  EXPECT_THAT(checks[0].detail, HasSubstr("less than 15 s"));
  EXPECT_EQ(checks[1].state, JobDevicesState::kNotChecked);
  EXPECT_THAT(checks[1].detail, HasSubstr("no cgroup of job 2"));
  EXPECT_EQ(checks[2].state, JobDevicesState::kNotChecked);
  EXPECT_THAT(checks[2].detail, HasSubstr("cgroup v2"));
  EXPECT_EQ(checks[3].state, JobDevicesState::kNotChecked);
  EXPECT_THAT(checks[3].detail, HasSubstr("no devices controller"));
  EXPECT_EQ(checks[4].state, JobDevicesState::kUnreadable);
  EXPECT_THAT(checks[4].detail, HasSubstr("/cg/job_5/devices.list"));
  EXPECT_EQ(checks[5].state, JobDevicesState::kUnreadable);
  EXPECT_THAT(checks[5].detail, HasSubstr("denied"));
  EXPECT_EQ(checks[6].state, JobDevicesState::kNotChecked);
  EXPECT_EQ(checks[7].state, JobDevicesState::kUnreadable);
  EXPECT_THAT(checks[7].detail, HasSubstr("more than 64 KiB"));
  EXPECT_EQ(checks[8].state, JobDevicesState::kNotChecked);
  EXPECT_THAT(checks[8].detail, HasSubstr("does not list the devices it denies"));
  EXPECT_THAT(checks[8].detail, ::testing::Not(HasSubstr("job_9")));  // counted with the others
}

TEST_F(JobDevicesCheckTest, AHetComponentIsFoundByItsOwnSlurmNumber) {
  // Component "17+1" is SLURM job 18 on this node, and its cgroup is job_18.
  open_["worker1/17+1"].push_back({.job_id = "17+1",
                                   .host = "worker1",
                                   .gpu_uuid = std::string(kUuid1),
                                   .from_ms = kNow - 60'000,
                                   .slurm_job_id = 18});
  dirs_[18].devices = "/cg/job_18";
  reader_.files.emplace("/cg/job_18/devices.list", attribution::CappedFile{"c 195:2 rw\n", false});
  const std::vector<JobDevicesCheck> checks = Check();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].job_id, "17+1");
  EXPECT_EQ(checks[0].state, JobDevicesState::kAgrees);
}

TEST_F(JobDevicesCheckTest, TheJsonCarriesTheCgroupSideOnlyWhenItWasRead) {
  AddJob(7, {kUuid0}, "c 195:3 rwm\n");
  AddJob(8, {kUuid0}, nullptr);
  const nlohmann::json json = JobDevicesToJson(Check());
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0], (nlohmann::json{{"job_id", "7"},
                                     {"state", "agrees"},
                                     {"allocated_gpus", {kUuid0}},
                                     {"cgroup_gpus", {kUuid0}}}));
  EXPECT_EQ(json[1]["state"], "not_checked");
  EXPECT_FALSE(json[1].contains("cgroup_gpus"));
  EXPECT_THAT(json[1]["detail"].get<std::string>(), HasSubstr("no cgroup of job 8"));
}

}  // namespace
}  // namespace job_devices_check_test
}  // namespace expanse::agent
