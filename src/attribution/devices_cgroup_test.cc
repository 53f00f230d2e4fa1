#include "attribution/devices_cgroup.h"

#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::attribution {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(DevicesCgroupTest, SlurmV1JobCgroup) {
  EXPECT_EQ(SlurmV1JobCgroup("slurm", 1000, 123), "/slurm/uid_1000/job_123");
  EXPECT_EQ(SlurmV1JobCgroup("/expanse-testcluster/worker1/slurm/", 0, 7),
            "/expanse-testcluster/worker1/slurm/uid_0/job_7");
}

TEST(DevicesCgroupTest, ReadsTheJobsDevicesList) {
  const TempDir cgroup_root;
  WriteFile(cgroup_root.path() + "/devices/slurm/uid_0/job_7/devices.list", "c 195:2 rwm\n");
  EXPECT_EQ(ReadJobDevicesList(cgroup_root.path(), "/slurm/uid_0/job_7").value(), "c 195:2 rwm\n");
  EXPECT_EQ(ReadJobDevicesList(cgroup_root.path(), "/slurm/uid_0/job_8").status().code(),
            StatusCode::kNotFound);
}

TEST(DevicesCgroupTest, RefusesPathsThatClimb) {
  const TempDir cgroup_root;
  EXPECT_EQ(ReadJobDevicesList(cgroup_root.path(), "/slurm/../../etc").status().message(),
            "job cgroup \"/slurm/../../etc\" is not an absolute path without . or .. components");
  EXPECT_EQ(ReadJobDevicesList(cgroup_root.path(), "slurm/job_1").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadJobDevicesList(cgroup_root.path(), "").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse::attribution
