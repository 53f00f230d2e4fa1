#include "agent/profiling_permissions.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::agent {
namespace profiling_permissions_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ProfilingPermissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-perm-XXXXXX";
    dir_ = mkdtemp(dir);
    chmod(dir_.c_str(), 0755);
    std::filesystem::create_directories(dir_ + "/var/lib/expanse/control");
    std::filesystem::create_directories(dir_ + "/srv/expanse/spool");
    options_.control_dir = dir_ + "/var/lib/expanse/control";
    options_.shared_prefix = dir_ + "/srv/expanse";
    options_.spool_dir = dir_ + "/srv/expanse/spool";
    options_.repairable_roots = {dir_ + "/var/lib/expanse", dir_ + "/srv/expanse/spool"};
    options_.daemon_uid = getuid();
    for (const char* d : {"/var", "/var/lib", "/var/lib/expanse", "/var/lib/expanse/control",
                          "/srv", "/srv/expanse", "/srv/expanse/spool"}) {
      chmod((dir_ + d).c_str(), 0755);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  mode_t Mode(const std::string& path) {
    struct stat st {};
    stat(path.c_str(), &st);
    return st.st_mode & 07777;
  }
  std::string dir_;
  PermissionCheckOptions options_;
};

TEST_F(ProfilingPermissionsTest, AllTraversable) {
  const PermissionCheckResult result = CheckProfilingPermissions(options_);
  EXPECT_EQ(result.problem, "");
  EXPECT_TRUE(result.repaired.empty());
}

TEST_F(ProfilingPermissionsTest, RepairsOnlyOwnedManagedDirectories) {
  chmod((dir_ + "/var/lib/expanse/control").c_str(), 0750);
  chmod((dir_ + "/srv/expanse/spool").c_str(), 0770);
  const PermissionCheckResult result = CheckProfilingPermissions(options_);
  EXPECT_EQ(result.problem, "");
  EXPECT_THAT(result.repaired,
              ElementsAre(dir_ + "/var/lib/expanse/control", dir_ + "/srv/expanse/spool"));
  EXPECT_EQ(Mode(dir_ + "/var/lib/expanse/control"), 0751u);
  EXPECT_EQ(Mode(dir_ + "/srv/expanse/spool"), 0771u);
}

TEST_F(ProfilingPermissionsTest, ReportsTheExactPathOfCustomerDirectories) {
  chmod((dir_ + "/var/lib").c_str(), 0750);      // an ancestor outside the managed roots
  chmod((dir_ + "/srv/expanse").c_str(), 0750);  // the shared-prefix root
  const PermissionCheckResult result = CheckProfilingPermissions(options_);
  EXPECT_THAT(result.problem, HasSubstr("missing o+x on " + dir_ + "/var/lib"));
  EXPECT_THAT(result.problem, HasSubstr("missing o+x on " + dir_ + "/srv/expanse"));
  EXPECT_TRUE(result.repaired.empty());
  EXPECT_EQ(Mode(dir_ + "/var/lib"), 0750u);  // left for the operator
}

// As a daemon runs it: the shared spool tree down to the workers' spool, and every directory a
// job's process passes to load the node's agent library, each from the shared prefix down.
TEST_F(ProfilingPermissionsTest, TheDaemonChecksTheWayToTheSpoolAndToTheAgentLibrary) {
  const std::string prefix = dir_ + "/srv/expanse";
  std::filesystem::create_directories(prefix + "/spool/workers");
  std::filesystem::create_directories(prefix + "/lib/cupti-nodes/h1/lib");
  for (const char* d : {"/spool/workers", "/lib", "/lib/cupti-nodes", "/lib/cupti-nodes/h1",
                        "/lib/cupti-nodes/h1/lib"}) {
    chmod((prefix + d).c_str(), 0755);
  }
  const PermissionCheckOptions daemon = DaemonPermissionOptions(
      dir_ + "/var/lib/expanse/control", prefix, prefix + "/spool/workers", "h1");
  EXPECT_EQ(daemon.agent_library_dir, prefix + "/lib/cupti-nodes/h1/lib");
  EXPECT_EQ(CheckProfilingPermissions(daemon).problem, "");

  chmod((prefix + "/spool").c_str(), 0750);            // the spool tree's root: the daemon's
  chmod((prefix + "/lib/cupti-nodes").c_str(), 0750);  // on the way to the agent library
  const PermissionCheckResult result = CheckProfilingPermissions(daemon);
  EXPECT_THAT(result.repaired, ElementsAre(prefix + "/spool"));
  EXPECT_EQ(Mode(prefix + "/spool"), 0751u);
  EXPECT_EQ(result.problem, "missing o+x on " + prefix + "/lib/cupti-nodes");
  EXPECT_EQ(Mode(prefix + "/lib/cupti-nodes"), 0750u) << "not in a root the daemon repairs";
}

// A prefix given with a trailing slash is the same prefix: nothing above it is walked.
TEST_F(ProfilingPermissionsTest, APrefixWithATrailingSlashStopsThere) {
  std::filesystem::create_directories(dir_ + "/srv/expanse/spool/workers");
  chmod((dir_ + "/srv/expanse/spool/workers").c_str(), 0755);
  chmod((dir_ + "/srv").c_str(), 0750);  // above the prefix: not the check's business here
  options_.control_dir.clear();
  options_.shared_prefix = dir_ + "/srv/expanse/";
  options_.spool_dir = dir_ + "/srv/expanse/spool/workers";
  EXPECT_EQ(CheckProfilingPermissions(options_).problem, "");
  chmod((dir_ + "/srv/expanse").c_str(), 0750);
  EXPECT_EQ(CheckProfilingPermissions(options_).problem, "missing o+x on " + dir_ + "/srv/expanse")
      << "named once";
}

TEST_F(ProfilingPermissionsTest, NotOwnedIsNotRepaired) {
  chmod((dir_ + "/var/lib/expanse/control").c_str(), 0750);
  options_.daemon_uid = getuid() + 1;
  const PermissionCheckResult result = CheckProfilingPermissions(options_);
  EXPECT_THAT(result.problem, HasSubstr("missing o+x on " + dir_ + "/var/lib/expanse/control"));
  EXPECT_EQ(Mode(dir_ + "/var/lib/expanse/control"), 0750u);
}

TEST_F(ProfilingPermissionsTest, DisableMarkerIsPublishedAndWithdrawn) {
  const std::string control = dir_ + "/var/lib/expanse/control";
  ASSERT_TRUE(PublishDisableMarker(control, true).ok());
  EXPECT_TRUE(std::filesystem::exists(control + "/disabled"));
  ASSERT_TRUE(PublishDisableMarker(control, false).ok());
  EXPECT_FALSE(std::filesystem::exists(control + "/disabled"));
}

TEST_F(ProfilingPermissionsTest, OperatorMarkerIsKept) {
  const std::string control = dir_ + "/var/lib/expanse/control";
  std::ofstream(control + "/disabled") << "site policy\n";
  ASSERT_TRUE(PublishDisableMarker(control, false).ok());
  EXPECT_TRUE(std::filesystem::exists(control + "/disabled"));
}

TEST_F(ProfilingPermissionsTest, PublishFailureNamesThePath) {
  // A file where the control directory should be.
  const std::string blocked = dir_ + "/blocked";
  std::ofstream(blocked) << "x";
  const Status status = PublishDisableMarker(blocked + "/control", true);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.reason(), "disable_marker_failed");
  EXPECT_THAT(status.message(), HasSubstr(blocked + "/control/disabled"));
}

TEST_F(ProfilingPermissionsTest, MonitorChecksEveryThirtySecondsAndLogsRepairs) {
  std::vector<std::string> logs;
  auto log = [&](const std::string& line) { logs.push_back(line); };
  PermissionMonitor monitor(options_, /*enabled=*/true);
  EXPECT_EQ(monitor.Check(1'000'000, log), "");
  chmod((dir_ + "/var/lib").c_str(), 0750);
  EXPECT_EQ(monitor.Check(1'010'000, log), "");  // 10 s later: not checked again yet
  EXPECT_THAT(monitor.Check(1'030'000, log), HasSubstr("missing o+x on " + dir_ + "/var/lib"));
  chmod((dir_ + "/var/lib/expanse/control").c_str(), 0700);
  chmod((dir_ + "/var/lib").c_str(), 0755);
  EXPECT_EQ(monitor.Check(1'060'000, log), "");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_THAT(logs[0], HasSubstr("missing o+x"));
  EXPECT_EQ(logs[1], "profiling_permissions: restored o+x on " + dir_ + "/var/lib/expanse/control");

  PermissionMonitor off(options_, /*enabled=*/false);
  chmod((dir_ + "/var/lib").c_str(), 0750);
  EXPECT_EQ(off.Check(1'000'000, log), "");
}

}  // namespace
}  // namespace profiling_permissions_test
}  // namespace expanse::agent
