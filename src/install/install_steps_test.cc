#include "install/install_steps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "deploy/templates.h"

namespace expanse::install {
namespace {

TEST(SentinelTest, AWorkerWithTheSameAccountNumbersAccepts) {
  testing::TempDir dir;
  Account here{"slurm", geteuid(), getegid()};
  dir.Write(deploy::kPreflightSentinelName, RenderSentinel(here, "ctl", 1));
  EXPECT_TRUE(CheckSentinel(dir.path(), here).ok());
}

TEST(SentinelTest, DifferentNumbersAreAMismatchNamingBoth) {
  testing::TempDir dir;
  Account controller{"slurm", 64030, 64030};
  dir.Write(deploy::kPreflightSentinelName, RenderSentinel(controller, "ctl", 1));
  Account worker{"slurm", 990, 990};
  Status s = CheckSentinel(dir.path(), worker);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "uid_mismatch");
  EXPECT_NE(s.message().find("64030:64030"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("990:990"), std::string::npos) << s.message();
}

TEST(SentinelTest, AMissingSentinelMeansAnotherMount) {
  testing::TempDir dir;
  Status s = CheckSentinel(dir.path(), Account{"slurm", 1, 1});
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
  EXPECT_TRUE(CheckPrefixWritable(dir.path()).ok());
  Status missing = CheckPrefixWritable(dir / "absent");
  EXPECT_NE(missing.message().find("does not exist"), std::string::npos);
  const std::string file = dir.Write("file", "x");
  EXPECT_FALSE(CheckPrefixWritable(file).ok());
}

TEST(VersionTest, HigherVersionIsNumeric) {
  EXPECT_EQ(HigherVersion("1.10.0", "1.9.3"), "1.10.0");
  EXPECT_EQ(HigherVersion("", "1.0.0"), "1.0.0");
  EXPECT_EQ(HigherVersion("2.0.0", ""), "2.0.0");
}

}  // namespace
}  // namespace expanse::install
