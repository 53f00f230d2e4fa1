#include "agent/phase_b_triggers.h"

#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "capture/capture_trigger.h"
#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace phase_b_triggers_test {
namespace {

using ::expanse::testing::TempDir;

mode_t Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(PrepareCaptureDirectories, MakesTheSpoolAndTriggerDirectoriesWithTheirModes) {
  TempDir dir;
  const mode_t old = umask(077);
  ASSERT_TRUE(PrepareCaptureDirectories(dir / "control").ok());
  umask(old);
  EXPECT_EQ(Mode(dir / "control/capture"), static_cast<mode_t>(S_ISVTX | 0733));
  EXPECT_EQ(Mode(dir / "control/phase-b"), 0755u);
  // A mode that drifted is put back.
  chmod((dir / "control/capture").c_str(), 0700);
  ASSERT_TRUE(PrepareCaptureDirectories(dir / "control").ok());
  EXPECT_EQ(Mode(dir / "control/capture"), static_cast<mode_t>(S_ISVTX | 0733));
}

TEST(PrepareCaptureDirectories, AFileInTheWayIsAnErrorNamingIt) {
  TempDir dir;
  dir.Write("control/capture", "not a directory");
  const Status status = PrepareCaptureDirectories(dir / "control");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("capture"), std::string::npos) << status.message();
}

// The operator's two switches (docs/runtime-settings.md): the agent off leaves the control
// directory alone; escalation off keeps the aggregates' spool but asks for no trace.
TEST(CaptureDirectoriesFor, TheSettingsDecideWhatTheCollectorUses) {
  TempDir dir;
  Result<CaptureDirectories> off = CaptureDirectoriesFor(false, true, dir / "off");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->capture_control_dir, "");
  EXPECT_EQ(off->phase_b_control_dir, "");
  EXPECT_FALSE(std::filesystem::exists(dir / "off"));

  Result<CaptureDirectories> no_escalation = CaptureDirectoriesFor(true, false, dir / "quiet");
  ASSERT_TRUE(no_escalation.ok()) << no_escalation.status();
  EXPECT_EQ(no_escalation->capture_control_dir, dir / "quiet");
  EXPECT_EQ(no_escalation->phase_b_control_dir, "");
  EXPECT_EQ(Mode(dir / "quiet/capture"), static_cast<mode_t>(S_ISVTX | 0733));

  Result<CaptureDirectories> both = CaptureDirectoriesFor(true, true, dir / "on");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->capture_control_dir, dir / "on");
  EXPECT_EQ(both->phase_b_control_dir, dir / "on");

  dir.Write("bad/capture", "not a directory");
  EXPECT_FALSE(CaptureDirectoriesFor(true, true, dir / "bad").ok());
}

TEST(WritePhaseBTrigger, WritesWhatTheAgentReads) {
  TempDir dir;
  ASSERT_TRUE(PrepareCaptureDirectories(dir.path()).ok());
  ASSERT_TRUE(WritePhaseBTrigger(dir.path(), "42", "throughput_drop", "GPU-3f0f2b8c-4a4e", 5000,
                                 std::chrono::seconds(60))
                  .ok());
  EXPECT_EQ(Mode(dir / "phase-b/42"), 0644u);
  std::string error;
  const auto trigger = capture::ReadTrigger(dir.path(), "42", &error);
  ASSERT_TRUE(trigger) << error;
  EXPECT_EQ(trigger->until_ms, 65000u);
  EXPECT_EQ(trigger->reason, "throughput_drop");
  EXPECT_EQ(trigger->gpus, std::vector<std::string>{"GPU-3f0f2b8c-4a4e"});
  // A later escalation of the same job is a new trigger (a new id), replacing the file.
  ASSERT_TRUE(WritePhaseBTrigger(dir.path(), "42", "gpu_idle", "GPU-3f0f2b8c-4a4e", 9000,
                                 std::chrono::seconds(60))
                  .ok());
  const auto again = capture::ReadTrigger(dir.path(), "42", &error);
  ASSERT_TRUE(again);
  EXPECT_NE(again->id, trigger->id);
}

TEST(WritePhaseBTrigger, RefusesAJobIdThatIsNotSlurmsAndPrunesOldTriggers) {
  TempDir dir;
  ASSERT_TRUE(PrepareCaptureDirectories(dir.path()).ok());
  EXPECT_FALSE(
      WritePhaseBTrigger(dir.path(), "../x", "gpu_idle", "GPU-a", 0, std::chrono::seconds(60))
          .ok());
  dir.Write("phase-b/7", "{}");
  const utimbuf old_times{1000, 1000};  // 1970: long past any window
  ASSERT_EQ(utime((dir / "phase-b/7").c_str(), &old_times), 0);
  const int64_t now_ms = 1'800'000'000'000;
  ASSERT_TRUE(
      WritePhaseBTrigger(dir.path(), "8", "gpu_idle", "GPU-a", now_ms, std::chrono::seconds(60))
          .ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "phase-b/7"));
  EXPECT_TRUE(std::filesystem::exists(dir / "phase-b/8"));
}

}  // namespace
}  // namespace phase_b_triggers_test
}  // namespace expanse::agent
