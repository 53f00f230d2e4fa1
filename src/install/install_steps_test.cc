#include "install/install_steps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"
#include "deploy/templates.h"
#include "install/host_changes.h"
#include "install/host_facts.h"
#include "install/installer.h"

namespace expanse::install {
namespace install_steps_test {
namespace {

TEST(SentinelTest, AWorkerWithTheSameAccountNumbersAccepts) {
  testing::TempDir dir;
  Account here{"slurm", geteuid(), getegid()};
  dir.Write(deploy::kPreflightSentinelName, RenderSentinel(here, "ctl", 1));
  EXPECT_TRUE(CheckSentinel(RealHost::Get(), dir.path(), here).ok());
}

TEST(SentinelTest, DifferentNumbersAreAMismatchNamingBoth) {
  testing::TempDir dir;
  Account controller{"slurm", 64030, 64030};
  dir.Write(deploy::kPreflightSentinelName, RenderSentinel(controller, "ctl", 1));
  Account worker{"slurm", 990, 990};
  Status s = CheckSentinel(RealHost::Get(), dir.path(), worker);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "uid_mismatch");
  EXPECT_NE(s.message().find("64030:64030"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("990:990"), std::string::npos) << s.message();
}

TEST(SentinelTest, AMissingSentinelMeansAnotherMount) {
  testing::TempDir dir;
  Status s = CheckSentinel(RealHost::Get(), dir.path(), Account{"slurm", 1, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "sentinel_missing");
}

TEST(ProblemsTest, EveryProblemIsListed) {
  Problems p;
  EXPECT_TRUE(p.ToStatus("preflight").ok());
  p.Add("first");
  p.Add("second");
  Status s = p.ToStatus("preflight");
  EXPECT_EQ(s.reason(), "preflight_failed");
  EXPECT_NE(s.message().find("2 problems; nothing was changed"), std::string::npos);
  EXPECT_NE(s.message().find("  - first\n  - second"), std::string::npos);
}

TEST(PrefixTest, AMissingPrefixOrAFileIsRefused) {
  testing::TempDir dir;
  EXPECT_TRUE(CheckPrefixWritable(RealHost::Get(), dir.path()).ok());
  Status missing = CheckPrefixWritable(RealHost::Get(), dir / "absent");
  EXPECT_NE(missing.message().find("does not exist"), std::string::npos);
  const std::string file = dir.Write("file", "x");
  EXPECT_FALSE(CheckPrefixWritable(RealHost::Get(), file).ok());
}

TEST(VersionTest, HigherVersionIsNumeric) {
  EXPECT_EQ(HigherVersion("1.10.0", "1.9.3"), "1.10.0");
  EXPECT_EQ(HigherVersion("", "1.0.0"), "1.0.0");
  EXPECT_EQ(HigherVersion("2.0.0", ""), "2.0.0");
}

// --- Steps on an in-memory host (core/memory_host.h) ---------------------------------

class HostStepsTest : public ::testing::Test {
 protected:
  HostStepsTest() {
    paths_.host = &host_;
    out_.progress = [this](const std::string& line) { lines_.push_back(line); };
    out_.detail = [this](const std::string& line) { lines_.push_back(line); };
    out_.text = [](const std::string&) {};
  }
  void WithSystemd() {
    ASSERT_TRUE(host_.MakeDirectories(paths_.systemd_runtime_dir, 0755).ok());
    host_.OnRun("systemctl", [](const std::vector<std::string>&) { return MemoryHost::Exit(0); });
  }

  MemoryHost host_;
  HostPaths paths_;
  Output out_;
  std::vector<std::string> lines_;
};

TEST_F(HostStepsTest, CheckSystemdNeedsTheRuntimeDirectoryAndAWorkingSystemctl) {
  EXPECT_EQ(CheckSystemd(paths_).reason(), "systemd_missing");
  EXPECT_TRUE(host_.commands().empty()) << "no systemctl call without systemd";
  ASSERT_TRUE(host_.MakeDirectories(paths_.systemd_runtime_dir, 0755).ok());
  Status no_systemctl = CheckSystemd(paths_);
  EXPECT_EQ(no_systemctl.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_systemctl.message().find("systemctl is not usable"), std::string::npos);
  WithSystemd();
  EXPECT_TRUE(CheckSystemd(paths_).ok());
  EXPECT_EQ(host_.commands().back(), "systemctl --version");
}

TEST_F(HostStepsTest, StopAndRemoveUnitRemovesOnlyOurUnit) {
  WithSystemd();
  const std::string ours = paths_.unit_dir + "/expanse-controller.service";
  host_.Put(ours, "# Managed by `expanse compute install` (unit format 1).\n[Unit]\n");
  DirectChanges direct(host_);
  ASSERT_TRUE(StopAndRemoveUnit(direct, paths_, "expanse-controller.service", "", out_).ok());
  EXPECT_FALSE(host_.Contents(ours).has_value());
  EXPECT_EQ(host_.commands(),
            (std::vector<std::string>{"systemctl is-active --quiet expanse-controller.service",
                                      "systemctl is-enabled --quiet expanse-controller.service",
                                      "systemctl disable --now expanse-controller.service",
                                      "systemctl daemon-reload"}));

  // An operator's own unit under our name is stopped, as asked, but never deleted.
  const std::string foreign = paths_.unit_dir + "/expanse-sampler.service";
  host_.Put(foreign, "[Unit]\nDescription=the site's own\n");
  ASSERT_TRUE(StopAndRemoveUnit(direct, paths_, "expanse-sampler.service", "", out_).ok());
  EXPECT_EQ(host_.Contents(foreign), "[Unit]\nDescription=the site's own\n");
  EXPECT_NE(lines_.back().find("is not ours"), std::string::npos) << lines_.back();
}

TEST_F(HostStepsTest, StopAndRemoveUnitWithoutSystemdOnlyRemovesTheFile) {
  const std::string ours = paths_.unit_dir + "/expanse-controller.service";
  host_.Put(ours, "# Managed by `expanse compute install` (unit format 1).\n");
  DirectChanges direct(host_);
  ASSERT_TRUE(StopAndRemoveUnit(direct, paths_, "expanse-controller.service", "", out_).ok());
  EXPECT_FALSE(host_.Contents(ours).has_value());
  EXPECT_TRUE(host_.commands().empty());
}

// Through a journal (a reinstall's cleanup), a rollback puts the unit file back, reloads
// systemd, and only then gives the unit back the state it had: running, or only enabled.
TEST_F(HostStepsTest, AJournalledUnitRemovalIsUndoneInTheRightOrder) {
  WithSystemd();
  const std::string ours = paths_.unit_dir + "/expanse-daemon.service";
  const std::string text = "# Managed by `expanse compute install` (unit format 1).\n[Unit]\n";
  for (const bool running : {true, false}) {
    host_.Put(ours, text);
    host_.OnRun("systemctl", [running](const std::vector<std::string>& argv) {
      return MemoryHost::Exit(argv[1] == "is-active" && !running ? 3 : 0);
    });
    Result<Journal> journal = Journal::Begin(host_, "/var/lib/expanse-install/journal");
    ASSERT_TRUE(journal.ok()) << journal.status();
    JournalChanges changes(*journal);
    ASSERT_TRUE(StopAndRemoveUnit(changes, paths_, "expanse-daemon.service", "", out_).ok());
    EXPECT_FALSE(host_.Contents(ours).has_value());
    host_.ClearCommands();
    ASSERT_TRUE(Journal::RollBack(host_, "/var/lib/expanse-install/journal", out_.detail).ok());
    EXPECT_EQ(host_.Contents(ours), text);
    EXPECT_EQ(host_.commands(),
              (std::vector<std::string>{"systemctl daemon-reload",
                                        running ? "systemctl enable --now expanse-daemon.service"
                                                : "systemctl enable expanse-daemon.service"}));
  }
}

TEST_F(HostStepsTest, RemovesWhatTheStateListsAndThenTheState) {
  InstallState state;
  state.role = "sampler";
  state.files = {"/srv/expanse/bin/expanse-daemon", "/srv/expanse/bin/gone"};
  state.trees = {"/srv/expanse/lib/cupti-nodes/w1"};
  host_.Put("/srv/expanse/bin/expanse-daemon", "ELF");
  host_.Put("/srv/expanse/lib/cupti-nodes/w1/lib/libcupti.so", "ELF");
  host_.Put("/srv/expanse/lib/cupti-nodes/w2/lib/libcupti.so", "ELF");
  host_.Put(StatePath(paths_.state_dir, "sampler"), RenderInstallState(state));
  DirectChanges direct(host_);
  ASSERT_TRUE(RemoveInstalledFiles(direct, paths_, state, out_).ok());
  ASSERT_TRUE(RemoveInstallState(paths_, "sampler").ok());
  EXPECT_EQ(host_.Files(),
            std::vector<std::string>{"/srv/expanse/lib/cupti-nodes/w2/lib/libcupti.so"})
      << "another host's CUPTI tree stays";
  EXPECT_EQ(lines_, (std::vector<std::string>{"removed /srv/expanse/bin/expanse-daemon",
                                              "removed /srv/expanse/lib/cupti-nodes/w1"}));
}

TEST_F(HostStepsTest, FactsComeFromTheHost) {
  EXPECT_EQ(SlurmVersion(host_), "") << "no scontrol";
  host_.OnRun("scontrol", [](const std::vector<std::string>&) {
    return MemoryHost::Exit(0, "slurm 22.05.8\n");
  });
  EXPECT_EQ(SlurmVersion(host_), "22.05.8");
  EXPECT_EQ(LookupAccount(host_, "slurm").status().reason(), "user_missing");
  host_.AddUser({"slurm", 64030, 64031});
  EXPECT_EQ(LookupAccount(host_, "slurm")->gid, 64031u);
  EXPECT_EQ(CaFileFromEnvironment(host_), "");
  host_.SetEnv("SSL_CERT_FILE", "/etc/ssl/site-ca.pem");
  EXPECT_EQ(CaFileFromEnvironment(host_), "/etc/ssl/site-ca.pem");
}

}  // namespace
}  // namespace install_steps_test
}  // namespace expanse::install
