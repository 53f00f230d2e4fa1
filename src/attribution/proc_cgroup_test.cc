#include "attribution/proc_cgroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::attribution {
namespace {

// A cgroup v1 task on a node with the usual hierarchies, as slurmstepd places it.
constexpr std::string_view kV1 =
    "12:cpuset:/slurm/uid_1000/job_123/step_0/task_0\n"
    "11:memory:/slurm/uid_1000/job_123/step_0/task_0\n"
    "10:devices:/slurm/uid_1000/job_123/step_0/task_0\n"
    "9:freezer:/slurm/uid_1000/job_123/step_0\n"
    "4:cpu,cpuacct:/system.slice/slurmd.service\n"
    "1:name=systemd:/system.slice/slurmd.service\n"
    "0::/system.slice/slurmd.service\n";

TEST(ProcCgroupTest, V1PrefersTheDevicesHierarchy) {
  const std::optional<CgroupPlacement> placement = ParseProcCgroup(kV1).value();
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->job.job_id, 123u);
  EXPECT_EQ(placement->job.step, "0");
  EXPECT_EQ(placement->job.job_cgroup, "/slurm/uid_1000/job_123");
  EXPECT_EQ(placement->controllers, "devices");
  EXPECT_EQ(placement->cgroup_version, 1);
}

TEST(ProcCgroupTest, V1WithNodePrefixAndBatchStep) {
  const auto placement =
      ParseProcCgroup("7:devices:/slurm_gpu03/uid_0/job_4242/step_batch\n").value();
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->job.job_id, 4242u);
  EXPECT_EQ(placement->job.step, "batch");
  EXPECT_EQ(placement->job.job_cgroup, "/slurm_gpu03/uid_0/job_4242");
}

TEST(ProcCgroupTest, TestClusterPrefixedPath) {
  const auto placement =
      ParseProcCgroup(
          "5:devices:/expanse-testcluster/worker1/slurm/uid_0/job_7/step_0/task_0\n"
          "3:freezer:/expanse-testcluster/worker1/slurm/uid_0/job_7/step_0\n")
          .value();
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->job.job_id, 7u);
  EXPECT_EQ(placement->job.step, "0");
  EXPECT_EQ(placement->job.job_cgroup, "/expanse-testcluster/worker1/slurm/uid_0/job_7");
}

TEST(ProcCgroupTest, V2Unified) {
  const auto placement =
      ParseProcCgroup("0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n").value();
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->job.job_id, 123u);
  EXPECT_EQ(placement->job.step, "0");
  EXPECT_EQ(placement->job.job_cgroup, "/system.slice/slurmstepd.scope/job_123");
  EXPECT_EQ(placement->cgroup_version, 2);
  EXPECT_EQ(placement->controllers, "");
  // A removed cgroup keeps its path with " (deleted)" after it.
  const auto deleted =
      ParseProcCgroup("0::/system.slice/slurmstepd.scope/job_9/step_extern (deleted)\n").value();
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(deleted->job.step, "extern");
}

TEST(ProcCgroupTest, NoJob) {
  EXPECT_EQ(ParseProcCgroup("0::/user.slice/user-1000.slice/session-3.scope\n").value(),
            std::nullopt);
  EXPECT_EQ(ParseProcCgroup("").value(), std::nullopt);
  // Not job components: no digits, a zero or zero-padded id, a prefix of a longer word, an id past
  // 32 bits.
  EXPECT_EQ(FindJobInCgroupPath("/slurm/job_/step_0"), std::nullopt);
  EXPECT_EQ(FindJobInCgroupPath("/slurm/job_0"), std::nullopt);
  EXPECT_EQ(FindJobInCgroupPath("/slurm/job_061"), std::nullopt);  // SLURM never pads ids
  EXPECT_EQ(FindJobInCgroupPath("/slurm/myjob_12"), std::nullopt);
  EXPECT_EQ(FindJobInCgroupPath("/slurm/job_12x"), std::nullopt);
  EXPECT_EQ(FindJobInCgroupPath("/slurm/job_4294967296"), std::nullopt);
}

TEST(ProcCgroupTest, FirstJobComponentWins) {
  const auto found = FindJobInCgroupPath("/slurm/uid_0/job_5/step_0/task_0/docker/job_6");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->job_id, 5u);
  const auto job_level = FindJobInCgroupPath("/slurm/uid_0/job_5");
  ASSERT_TRUE(job_level.has_value());
  EXPECT_EQ(job_level->step, "");
  EXPECT_EQ(job_level->job_cgroup, "/slurm/uid_0/job_5");
}

TEST(ProcCgroupTest, Errors) {
  EXPECT_EQ(ParseProcCgroup("10:devices:/slurm/uid_0/job_1\ngarbage\n").status().message(),
            "cgroup line 2: expected \"hierarchy-id:controllers:path\", got \"garbage\"");
  EXPECT_EQ(ParseProcCgroup("x:devices:/a\n").status().message(),
            "cgroup line 1: hierarchy id \"x\" is not a number");
  EXPECT_EQ(ParseProcCgroup("3:devices:relative\n").status().reason(), "cgroup_malformed");
  const Status conflict = ParseProcCgroup(
                              "10:devices:/slurm/uid_0/job_5/step_0\n"
                              "9:freezer:/slurm/uid_0/job_6/step_0\n")
                              .status();
  EXPECT_EQ(conflict.message(),
            "cgroup lines disagree: \"devices\" names job 5, \"freezer\" names job 6");
  EXPECT_EQ(conflict.reason(), "cgroup_conflict");
}

TEST(ProcCgroupTest, LinePathMayHoldColons) {
  const ProcCgroupLine line = ParseProcCgroupLine("0::/a:b/job_3").value();
  EXPECT_EQ(line.hierarchy_id, 0u);
  EXPECT_EQ(line.path, "/a:b/job_3");
}

}  // namespace
}  // namespace expanse::attribution
