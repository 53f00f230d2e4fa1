#include "agent/sampler_bootstrap.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace sampler_bootstrap_test {
namespace {

using Commands = std::vector<std::string>;

constexpr char kLocalUnit[] = "/etc/systemd/system/expanse-sampler.service";
constexpr char kSharedUnit[] = "/srv/expanse/lib/systemd/expanse-sampler.service";
constexpr char kRestart[] = "systemctl --no-block restart expanse-sampler.service";

class SamplerBootstrapTest : public ::testing::Test {
 protected:
  SamplerBootstrapTest() {
    options_.binary = "/srv/expanse/bin/expanse-daemon";
    options_.state_dir = "/var/lib/expanse/sampler";
    options_.user = "expanse";
    host_.AddUser({"expanse", 990, 991});
  }
  // A node under systemd whose systemctl answers every call with `code`.
  void Systemd(int code) {
    ASSERT_TRUE(host_.MakeDirectories("/run/systemd/system", 0755).ok());
    ASSERT_TRUE(host_.MakeDirectories("/etc/systemd/system", 0755).ok());
    host_.OnRun("systemctl", [code](const std::vector<std::string>&) {
      return MemoryHost::Exit(code, "", code == 0 ? "" : "Failed to restart: unit not found");
    });
  }

  MemoryHost host_;
  BootstrapOptions options_;
};

TEST_F(SamplerBootstrapTest, AHostWithTheControllerInstalledIsKnownByTheInstallersRecord) {
  EXPECT_FALSE(ControllerInstalledHere(host_, "/var/lib/expanse-install"));
  host_.Put("/var/lib/expanse-install/sampler.json", "{}", 0600);
  EXPECT_FALSE(ControllerInstalledHere(host_, "/var/lib/expanse-install")) << "a worker's record";
  host_.Put("/var/lib/expanse-install/controller.json", "{}", 0600);
  EXPECT_TRUE(ControllerInstalledHere(host_, "/var/lib/expanse-install"));
}

TEST_F(SamplerBootstrapTest, WithoutSystemdTheCallerExecsTheSamplerAsTheAccount) {
  // Left by a sampler that ran as root: the account's sampler could not open them.
  host_.Put(options_.state_dir + "/sampler.lock", "", 0644);
  host_.Put(options_.state_dir + "/sampler.pid", "30961 1:2:3:4\n", 0644);
  host_.Put(options_.state_dir + "/spool-writer.state", "7\n", 0600);
  const SamplerStartPlan plan = StartSampler(options_, host_);
  EXPECT_EQ(plan.how, SamplerStart::kExec);
  ASSERT_TRUE(plan.account.has_value());
  EXPECT_EQ(plan.account->uid, 990u);
  EXPECT_TRUE(host_.commands().empty());
  const std::optional<FileInfo> state = host_.Stat(options_.state_dir);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->type, FileInfo::Type::kDirectory);
  EXPECT_EQ(state->mode, 0755u);
  EXPECT_EQ(state->uid, 990u);
  EXPECT_EQ(state->gid, 991u);
  for (const char* name : {"/sampler.lock", "/sampler.pid", "/spool-writer.state"}) {
    EXPECT_EQ(host_.Stat(options_.state_dir + name)->uid, 990u) << name;
    EXPECT_EQ(host_.Stat(options_.state_dir + name)->gid, 991u) << name;
  }
}

// The control directory is made for the account (its sampler makes the capture spool and the
// Phase B triggers there); one an operator's account owns is left alone.
TEST_F(SamplerBootstrapTest, TheControlDirectoryIsTheAccountsUnlessSomeoneElseHasIt) {
  options_.control_dir = "/var/lib/expanse/control";
  StartSampler(options_, host_);
  std::optional<FileInfo> control = host_.Stat(options_.control_dir);
  ASSERT_TRUE(control.has_value());
  EXPECT_EQ(control->type, FileInfo::Type::kDirectory);
  EXPECT_EQ(control->uid, 990u);

  MemoryHost other;
  other.AddUser({"expanse", 990, 991});
  ASSERT_TRUE(other.MakeDirectories(options_.control_dir, 0755).ok());
  ASSERT_TRUE(other.SetOwner(options_.control_dir, 1234, 1234).ok());
  StartSampler(options_, other);
  EXPECT_EQ(other.Stat(options_.control_dir)->uid, 1234u);
}

TEST_F(SamplerBootstrapTest, AnUnknownAccountStartsNothing) {
  options_.user = "nobody-here";
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kNone);
  options_.user = "";
  const SamplerStartPlan plan = StartSampler(options_, host_);
  EXPECT_EQ(plan.how, SamplerStart::kExec);  // as the caller
  EXPECT_FALSE(plan.account.has_value());
}

TEST_F(SamplerBootstrapTest, TheLocalUnitIsRestartedAndTheStateGivenToTheAccount) {
  Systemd(0);
  host_.Put(kLocalUnit, "[Service]\nExecStart=/x\n");
  host_.Put(options_.state_dir + "/sampler.lock", "");  // left by a sampler running as root
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kUnit);
  EXPECT_EQ(host_.commands(), Commands{kRestart});
  EXPECT_EQ(host_.Stat(options_.state_dir + "/sampler.lock")->uid, 990u);
  EXPECT_EQ(host_.Stat(options_.state_dir)->uid, 990u);
}

TEST_F(SamplerBootstrapTest, TheSharedUnitIsInstalledWhenItDiffers) {
  Systemd(0);
  host_.Put(kSharedUnit, "[Service]\nExecStart=/srv/expanse/bin/expanse-daemon --role sampler\n");
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kUnit);
  EXPECT_EQ(host_.Contents(kLocalUnit), host_.Contents(kSharedUnit));
  EXPECT_EQ(host_.Stat(kLocalUnit)->mode, 0644u);
  EXPECT_EQ(host_.commands(), (Commands{"systemctl daemon-reload", kRestart}));

  // The same unit again: no reload.
  MemoryHost again;
  again.AddUser({"expanse", 990, 991});
  ASSERT_TRUE(again.MakeDirectories("/run/systemd/system", 0755).ok());
  again.OnRun("systemctl", [](const std::vector<std::string>&) { return MemoryHost::Exit(0); });
  again.Put(kSharedUnit, *host_.Contents(kSharedUnit));
  again.Put(kLocalUnit, *host_.Contents(kSharedUnit));
  EXPECT_EQ(StartSampler(options_, again).how, SamplerStart::kUnit);
  EXPECT_EQ(again.commands(), Commands{kRestart});
}

TEST_F(SamplerBootstrapTest, AnExplicitSamplerInstallKeepsItsUnit) {
  Systemd(0);
  host_.Put(kLocalUnit, "operator's unit\n");
  host_.Put(kSharedUnit, "shared unit\n");
  host_.Put("/var/lib/expanse-install/sampler.json", "{}");
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kUnit);
  EXPECT_EQ(host_.Contents(kLocalUnit), "operator's unit\n");
  EXPECT_EQ(host_.commands(), Commands{kRestart});
}

TEST_F(SamplerBootstrapTest, NoUnitAnywhereStartsTheSamplerDirectly) {
  Systemd(0);
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kExec);
  EXPECT_TRUE(host_.commands().empty());
}

// systemd refusing the unit (masked, stopped on purpose) is its call: no unmanaged sampler is
// started beside it.
TEST_F(SamplerBootstrapTest, ASystemctlThatRefusesStartsNothingElse) {
  Systemd(1);
  host_.Put(kLocalUnit, "[Service]\n");
  const SamplerStartPlan plan = StartSampler(options_, host_);
  EXPECT_EQ(plan.how, SamplerStart::kNone);
  EXPECT_EQ(host_.commands(), Commands{kRestart});
}

TEST_F(SamplerBootstrapTest, AMissingSystemctlFallsBackToADirectStart) {
  ASSERT_TRUE(host_.MakeDirectories("/run/systemd/system", 0755).ok());
  host_.Put(kSharedUnit, "shared unit\n");
  // No /etc/systemd/system to write the unit into: the shared unit cannot be installed.
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kExec);
  EXPECT_TRUE(host_.commands().empty());

  ASSERT_TRUE(host_.MakeDirectories("/etc/systemd/system", 0755).ok());
  // The unit is written, but systemctl is not there to run it (MemoryHost: exit 127).
  EXPECT_EQ(StartSampler(options_, host_).how, SamplerStart::kExec);
  EXPECT_EQ(host_.commands(), (Commands{"systemctl daemon-reload", kRestart}));
}

// An old sampler that ignores SIGTERM (stuck, or a blocked signal; unless told otherwise) while
// holding the node's lock: a child of this test, which runs this test's binary.
class OldSampler {
 public:
  explicit OldSampler(const std::string& state_dir, bool ignores_sigterm = true) {
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    pid_ = fork();
    if (pid_ == 0) {
      if (ignores_sigterm)
        signal(SIGTERM, SIG_IGN);
      Result<SamplerInstanceLock> lock = SamplerInstanceLock::Acquire(state_dir, "1:2:3:4");
      const char byte = lock.ok() ? 'y' : 'n';
      (void)!write(ready[1], &byte, 1);
      for (;;)
        pause();
    }
    char byte = 0;
    EXPECT_EQ(read(ready[0], &byte, 1), 1);
    EXPECT_EQ(byte, 'y') << "the child took the lock";
    close(ready[0]);
    close(ready[1]);
  }
  ~OldSampler() {
    if (pid_ <= 0)
      return;  // reaped already (kill(-1) would signal every process)
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  // The signal that ended it, or 0 while it runs.
  int EndedBy() {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_)
      return 0;
    pid_ = -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string OwnBinary() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
}

TEST(StopOldSamplerTest, OneThatIgnoresSigtermIsKilledSoTheNodeConverges) {
  testing::TempDir dir;
  OldSampler old(dir.path());
  EXPECT_TRUE(StopOldSampler(dir.path(), old.pid(),
                             "/srv/prefix/bin/" + OwnBinary().substr(OwnBinary().rfind('/') + 1),
                             std::chrono::milliseconds(300)));
  EXPECT_EQ(old.EndedBy(), SIGKILL);
  EXPECT_TRUE(SamplerInstanceLock::Acquire(dir.path(), "5:6:7:8").ok()) << "the lock is free";
}

TEST(StopOldSamplerTest, TheOldBinaryIsKnownDeletedOrSetAsideButNotAnotherProgram) {
  const std::string binary = "/srv/prefix/bin/expanse-daemon";
  EXPECT_TRUE(IsSameProgram("/srv/prefix/bin/expanse-daemon", binary));
  EXPECT_TRUE(IsSameProgram("/srv/prefix/bin/expanse-daemon (deleted)", binary));
  EXPECT_TRUE(IsSameProgram("/srv/prefix/bin/expanse-daemon.expanse-undo-7 (deleted)", binary));
  EXPECT_FALSE(IsSameProgram("/usr/bin/python3.11", binary));
  EXPECT_FALSE(IsSameProgram("/srv/prefix/bin/expanse-daemon.expanse-undo-x", binary));
  EXPECT_FALSE(IsSameProgram("/srv/prefix/bin/expanse-daemon-helper (deleted)", binary));
  EXPECT_FALSE(IsSameProgram("", binary));
}

TEST(StopOldSamplerTest, AProcessRunningAnotherProgramIsNeverKilled) {
  testing::TempDir dir;
  OldSampler other(dir.path());
  EXPECT_FALSE(StopOldSampler(dir.path(), other.pid(), "/srv/prefix/bin/expanse-daemon",
                              std::chrono::milliseconds(200)));
  EXPECT_EQ(other.EndedBy(), 0) << "still running: its pid may have been reused";
}

// Not even SIGTERM: the pid file is the daemon account's, and the bootstrap runs as root.
TEST(StopOldSamplerTest, AnotherProgramIsNotSentSigtermEither) {
  testing::TempDir dir;
  OldSampler other(dir.path(), /*ignores_sigterm=*/false);
  EXPECT_FALSE(StopOldSampler(dir.path(), other.pid(), "/srv/prefix/bin/expanse-daemon",
                              std::chrono::milliseconds(200)));
  EXPECT_EQ(other.EndedBy(), 0) << "a SIGTERM would have ended it";
}

}  // namespace
}  // namespace sampler_bootstrap_test
}  // namespace expanse::agent
