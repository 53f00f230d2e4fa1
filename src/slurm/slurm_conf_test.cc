#include "slurm/slurm_conf.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "slurm/slurm_conf_test_util.h"

namespace expanse::slurm {
namespace slurm_conf_test {
namespace {

using testing::ConfFiles;
using testing::ParseFiles;

constexpr char kMain[] = "/etc/slurm/slurm.conf";

TEST(ParseSlurmConfTest, RecordsEveryAssignmentWithItsPlace) {
  const Result<SlurmConf> conf = ParseFiles({{kMain,
                                              "# cluster\n"
                                              "ClusterName=Alpha\n"
                                              "\n"
                                              "prolog = /etc/slurm/a.sh  # first\n"
                                              "NodeName=n[1-2] CPUs=4 \\\n"
                                              "  Gres=gpu:2\n"
                                              "PROLOG=\"/etc/slurm/b c.sh\"\n"}});
  ASSERT_TRUE(conf.ok()) << conf.status();
  const std::vector<SlurmConfAssignment>& all = conf->assignments();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[1].key, "prolog");
  EXPECT_EQ(all[1].value, "/etc/slurm/a.sh");
  EXPECT_EQ(all[1].line, 4);
  EXPECT_EQ(all[1].path, kMain);
  EXPECT_EQ(all[2].key, "NodeName");
  EXPECT_EQ(all[2].value, "n[1-2]");
  EXPECT_EQ(all[2].rest, "CPUs=4   Gres=gpu:2");
  EXPECT_EQ(all[2].line, 5);
  EXPECT_EQ(all[2].end_line, 6);
  EXPECT_EQ(all[3].value, "/etc/slurm/b c.sh");
  EXPECT_EQ(all[3].rest, "");
  // Keys are case-insensitive and the last assignment wins.
  EXPECT_EQ(conf->AssignmentsOf("Prolog").size(), 2u);
  EXPECT_EQ(conf->EffectiveValue("Prolog"), "/etc/slurm/b c.sh");
  EXPECT_EQ(conf->EffectiveAssignment("prolog")->line, 7);
  EXPECT_EQ(conf->EffectiveValue("Epilog"), std::nullopt);
  EXPECT_EQ(conf->EffectiveAssignment("Epilog"), nullptr);
}

TEST(ParseSlurmConfTest, ReadsIncludesInline) {
  const Result<SlurmConf> conf =
      ParseFiles({{kMain,
                   "Prolog=/a\n"
                   "Include conf.d/hooks.conf\n"
                   "include /srv/site/nodes.conf\n"
                   "Epilog=/main-epilog\n"},
                  // Relative to the including file's directory, as SLURM 22.05's code does.
                  {"/etc/slurm/conf.d/hooks.conf", "Prolog=/b\nInclude more.conf\n"},
                  {"/etc/slurm/conf.d/more.conf", "Epilog=/more-epilog\n"},
                  {"/srv/site/nodes.conf", "NodeName=n1\n"}});
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_EQ(conf->EffectiveValue("Prolog"), "/b");
  EXPECT_EQ(conf->EffectiveAssignment("Prolog")->path, "/etc/slurm/conf.d/hooks.conf");
  EXPECT_EQ(conf->EffectiveValue("Epilog"), "/main-epilog");
  ASSERT_EQ(conf->files().size(), 4u);
  EXPECT_EQ(conf->files()[0].path, kMain);
  EXPECT_EQ(conf->files()[2].path, "/etc/slurm/conf.d/more.conf");
  EXPECT_NE(conf->FindFile("/srv/site/nodes.conf"), nullptr);
  std::vector<std::string> order;
  for (const SlurmConfAssignment& assignment : conf->assignments())
    order.push_back(assignment.value);
  EXPECT_EQ(order, (std::vector<std::string>{"/a", "/b", "/more-epilog", "n1", "/main-epilog"}));
}

TEST(ParseSlurmConfTest, ReplacesPercentCWithTheLowerCaseClusterName) {
  const Result<SlurmConf> conf = ParseFiles(
      {{kMain, "ClusterName=GPU\nInclude %c-%c.conf\n"}, {"/etc/slurm/gpu-gpu.conf", "A=1\n"}});
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_EQ(conf->EffectiveValue("A"), "1");
  EXPECT_EQ(ParseFiles({{kMain, "Include %c.conf\n"}}).status().message(),
            "/etc/slurm/slurm.conf:1: Include uses %c but no ClusterName is set before it");
}

TEST(ParseSlurmConfTest, SameFileIncludedTwiceIsReadTwiceButListedOnce) {
  const Result<SlurmConf> conf = ParseFiles(
      {{kMain, "Include x.conf\nA=2\nInclude x.conf\n"}, {"/etc/slurm/x.conf", "A=1\n"}});
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_EQ(conf->AssignmentsOf("A").size(), 3u);
  EXPECT_EQ(conf->EffectiveValue("A"), "1");
  EXPECT_EQ(conf->files().size(), 2u);
}

TEST(ParseSlurmConfTest, ReportsMissingFiles) {
  const Result<SlurmConf> missing_main = ParseFiles({});
  EXPECT_EQ(missing_main.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing_main.status().message(), "/etc/slurm/slurm.conf: no such file");
  const Result<SlurmConf> missing = ParseFiles({{kMain, "A=1\nInclude nodes.conf\n"}});
  EXPECT_EQ(missing.status().reason(), "slurm_conf_not_found");
  EXPECT_EQ(missing.status().message(),
            "/etc/slurm/slurm.conf:2: Include /etc/slurm/nodes.conf: no such file");
  // SLURM does not expand wildcards in Include, so a glob names a file that is not there.
  const Result<SlurmConf> glob =
      ParseFiles({{kMain, "Include conf.d/*.conf\n"}, {"/etc/slurm/conf.d/a.conf", "A=1\n"}});
  EXPECT_EQ(glob.status().message(),
            "/etc/slurm/slurm.conf:1: Include /etc/slurm/conf.d/*.conf: no such file (SLURM "
            "reads Include paths literally; it does not expand wildcards)");
}

TEST(ParseSlurmConfTest, RefusesLinesSlurmRefuses) {
  const Result<SlurmConf> bad = ParseFiles({{kMain, "A=1\nthis is not a setting\n"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().reason(), "slurm_conf_syntax");
  EXPECT_EQ(bad.status().message(),
            "/etc/slurm/slurm.conf:2: expected key=value, got \"this is not a setting\"");
  EXPECT_EQ(
      ParseFiles({{kMain, "Include a.conf b\n"}, {"/etc/slurm/a.conf", ""}}).status().message(),
      "/etc/slurm/slurm.conf:1: text after the Include file name: \"b\"");
  EXPECT_EQ(ParseFiles({{kMain, "Include   \n"}}).status().message(),
            "/etc/slurm/slurm.conf:1: Include without a file name");
  EXPECT_EQ(ParseFiles({{kMain, std::string("A=1\nB=x\0y\n", 10)}}).status().message(),
            "/etc/slurm/slurm.conf:2: NUL byte; this is not a text file");
  EXPECT_EQ(ParseSlurmConf("slurm.conf", testing::MemoryReader({})).status().message(),
            "slurm.conf path \"slurm.conf\" is not absolute");
}

TEST(ParseSlurmConfTest, StopsIncludeCycles) {
  const Result<SlurmConf> cycle =
      ParseFiles({{kMain, "Include a.conf\n"},
                  {"/etc/slurm/a.conf", "Include ../slurm/./b.conf\n"},
                  {"/etc/slurm/b.conf", "A=1\nInclude /etc/slurm/slurm.conf\n"}});
  EXPECT_EQ(cycle.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cycle.status().message(),
            "/etc/slurm/../slurm/./b.conf:2: Include cycle: /etc/slurm/slurm.conf -> "
            "/etc/slurm/a.conf -> /etc/slurm/b.conf -> /etc/slurm/slurm.conf");
}

TEST(ParseSlurmConfTest, LimitsIncludeDepth) {
  ConfFiles files{{kMain, "Include f1.conf\n"}};
  for (int i = 1; i <= kMaxSlurmConfIncludeDepth + 1; ++i) {
    files["/etc/slurm/f" + std::to_string(i) + ".conf"] =
        "Include f" + std::to_string(i + 1) + ".conf\n";
  }
  const Result<SlurmConf> deep = ParseFiles(files);
  EXPECT_EQ(deep.status().message(),
            "/etc/slurm/f16.conf:1: Include nested more than 16 files deep");
}

TEST(ParseSlurmConfTest, LimitsBytesAndReads) {
  const Result<SlurmConf> huge =
      ParseFiles({{kMain, std::string(kMaxSlurmConfFileBytes + 1, '#')}});
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().reason(), "slurm_conf_too_large");
  EXPECT_EQ(huge.status().message(),
            "/etc/slurm/slurm.conf: larger than 8 MiB; is it really a SLURM configuration file?");

  // Each file is within its limit, but together they are not: big.conf is read five times.
  const std::string big(kMaxSlurmConfFileBytes - 100, '#');
  const Result<SlurmConf> total =
      ParseFiles({{kMain,
                   "Include big.conf\nInclude big.conf\nInclude big.conf\nInclude big.conf\n"
                   "Include big.conf\n"},
                  {"/etc/slurm/big.conf", big}});
  EXPECT_EQ(total.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(total.status().message(),
            "/etc/slurm/big.conf: the configuration files together exceed 32 MiB");

  // A file that includes another twice, for 9 levels, would be read 2^9 times.
  ConfFiles fan{{kMain, "Include l1.conf\nInclude l1.conf\n"}};
  for (int i = 1; i <= 9; ++i) {
    const std::string next = "l" + std::to_string(i + 1) + ".conf";
    fan["/etc/slurm/l" + std::to_string(i) + ".conf"] =
        "Include " + next + "\nInclude " + next + "\n";
  }
  fan["/etc/slurm/l10.conf"] = "A=1\n";
  const Result<SlurmConf> reads = ParseFiles(fan);
  EXPECT_EQ(reads.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(reads.status().message().find("more than 256 configuration files read"),
            std::string::npos)
      << reads.status();
}

TEST(ReadSlurmConfTest, ReadsRealFilesAndRefusesNonRegularOnes) {
  testing::TempDir dir;
  dir.Write("slurm.conf", "Include hooks.conf\nInclude fifo\n");
  dir.Write("hooks.conf", "Prolog=/p\n");
  ASSERT_EQ(mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
  const Result<SlurmConf> conf = ReadSlurmConf(RealHost::Get(), dir.path() + "/slurm.conf");
  EXPECT_EQ(conf.status().message(), dir.path() + "/fifo: not a regular file");

  dir.Write("slurm.conf", "Include hooks.conf\n");
  const Result<SlurmConf> good = ReadSlurmConf(RealHost::Get(), dir.path() + "/slurm.conf");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->EffectiveValue("Prolog"), "/p");
  EXPECT_EQ(good->files()[1].contents, "Prolog=/p\n");
}

// Discovery on an in-memory host whose files, environment and scontrol the test decides.
class DiscoverSlurmConfTest : public ::testing::Test {
 protected:
  void AddFiles(const std::vector<std::string>& paths) {
    for (const std::string& path : paths)
      host_.Put(path, "ClusterName=c\n");
  }
  void Scontrol(SubprocessResult answer) {
    host_.OnRun("scontrol", [answer](const std::vector<std::string>&) { return answer; });
  }
  std::vector<std::string> Ran() const { return host_.commands(); }

  MemoryHost host_;
};

TEST_F(DiscoverSlurmConfTest, FlagMustBeAbsoluteAndExist) {
  AddFiles({"/site/slurm.conf"});
  EXPECT_EQ(*DiscoverSlurmConf("/site/slurm.conf", host_), "/site/slurm.conf");
  const Result<std::string> relative = DiscoverSlurmConf("slurm.conf", host_);
  EXPECT_EQ(relative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(relative.status().message(),
            "--slurm-conf must be an absolute path, got \"slurm.conf\"");
  EXPECT_EQ(DiscoverSlurmConf("/etc/slurm/slurm.conf", host_).status().message(),
            "--slurm-conf /etc/slurm/slurm.conf: no such file");
  EXPECT_TRUE(Ran().empty());
}

TEST_F(DiscoverSlurmConfTest, TriesEnvironmentThenScontrolThenDefaults) {
  AddFiles({"/env/slurm.conf", "/from/scontrol.conf", "/etc/slurm-llnl/slurm.conf"});
  host_.SetEnv("SLURM_CONF", "/env/slurm.conf");
  EXPECT_EQ(*DiscoverSlurmConf(std::nullopt, host_), "/env/slurm.conf");

  host_.SetEnv("SLURM_CONF", "/env/missing.conf");
  SubprocessResult scontrol;
  scontrol.exit_code = 0;
  scontrol.stdout_text =
      "Configuration data as of 2024-01-01T00:00:00\n"
      "SLURM_CONF_SERVER       = x\n"
      "SLURM_CONF              = /from/scontrol.conf\n"
      "SLURM_VERSION           = 22.05.8\n";
  Scontrol(scontrol);
  EXPECT_EQ(*DiscoverSlurmConf(std::nullopt, host_), "/from/scontrol.conf");
  EXPECT_EQ(Ran(), (std::vector<std::string>{"scontrol show config"}));

  Scontrol(MemoryHost::Exit(127, "", "scontrol: command not found"));
  EXPECT_EQ(*DiscoverSlurmConf(std::nullopt, host_), "/etc/slurm-llnl/slurm.conf");
}

TEST_F(DiscoverSlurmConfTest, ErrorListsEveryAttempt) {
  SubprocessResult failed;
  failed.exit_code = 1;
  failed.stderr_text = "slurm_load_ctl_conf error: Unable to contact slurm controller\nmore\n";
  Scontrol(failed);
  const Result<std::string> none = DiscoverSlurmConf(std::nullopt, host_);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().reason(), "slurm_conf_not_found");
  EXPECT_EQ(none.status().message(),
            "cannot find slurm.conf; tried $SLURM_CONF (unset); `scontrol show config` (exit "
            "status 1: \"slurm_load_ctl_conf error: Unable to contact slurm controller\"); "
            "/etc/slurm/slurm.conf (missing); /etc/slurm-llnl/slurm.conf (missing). Pass "
            "--slurm-conf /absolute/path/slurm.conf");

  host_.SetEnv("SLURM_CONF", "relative.conf");
  Scontrol(MemoryHost::Exit(127, "", "scontrol: command not found"));
  EXPECT_EQ(DiscoverSlurmConf(std::nullopt, host_).status().message(),
            "cannot find slurm.conf; tried $SLURM_CONF (\"relative.conf\" is not a file here); "
            "`scontrol show config` (exit status 127: \"scontrol: command not found\"); "
            "/etc/slurm/slurm.conf (missing); "
            "/etc/slurm-llnl/slurm.conf (missing). Pass --slurm-conf /absolute/path/slurm.conf");
}

TEST(SlurmConfFromScontrolTest, ReadsTheSlurmConfLine) {
  EXPECT_EQ(SlurmConfFromScontrol("A = 1\nSLURM_CONF              = /etc/slurm/slurm.conf\r\n"),
            "/etc/slurm/slurm.conf");
  EXPECT_EQ(SlurmConfFromScontrol("SLURM_CONF_SERVER = x\n"), std::nullopt);
  EXPECT_EQ(SlurmConfFromScontrol("SLURM_CONF =   \n"), std::nullopt);
  EXPECT_EQ(SlurmConfFromScontrol(""), std::nullopt);
}

}  // namespace
}  // namespace slurm_conf_test
}  // namespace expanse::slurm
