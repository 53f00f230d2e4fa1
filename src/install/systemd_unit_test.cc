#include "install/systemd_unit.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "core/test_temp_dir.h"

namespace expanse::install {
namespace systemd_unit_test {
namespace {

using ::expanse::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

UnitOptions Controller() {
  UnitOptions o;
  o.role = UnitRole::kController;
  o.daemon_binary = "/srv/expanse/bin/expanse-daemon";
  o.user = "slurm";
  o.config_path = "/var/lib/slurm/.expanse/config.json";
  o.shared_prefix = "/srv/expanse";
  return o;
}

UnitOptions Sampler() {
  UnitOptions o = Controller();
  o.role = UnitRole::kSampler;
  o.config_path.clear();
  return o;
}

std::string Render(const UnitOptions& options) {
  Result<std::string> unit = RenderUnit(options);
  if (!unit.ok())
    return "<error> " + unit.status().ToString();
  return *unit;
}

std::string RenderError(const UnitOptions& options) {
  Result<std::string> unit = RenderUnit(options);
  if (unit.ok())
    return "<rendered without error>";
  EXPECT_EQ(unit.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unit.status().reason(), "invalid_unit_option");
  return unit.status().message();
}

// --- Content ------------------------------------------------------------------

TEST(RenderUnitTest, ControllerHasItsKeyLines) {
  const std::string unit = Render(Controller());
  EXPECT_THAT(unit, HasSubstr("[Unit]\nDescription=Expanse controller daemon"));
  EXPECT_THAT(unit, HasSubstr("\nWants=network-online.target\n"));
  EXPECT_THAT(unit, HasSubstr("\nAfter=network-online.target remote-fs.target\n"));
  EXPECT_THAT(unit, HasSubstr("\n[Service]\nType=simple\nUser=slurm\n"));
  EXPECT_THAT(unit, HasSubstr("\nExecStart=/srv/expanse/bin/expanse-daemon --role controller "
                              "--shared-prefix /srv/expanse\n"));
  EXPECT_THAT(
      unit, HasSubstr("\nEnvironment=EXPANSE_DAEMON_CONFIG=/var/lib/slurm/.expanse/config.json\n"));
  EXPECT_THAT(unit, HasSubstr("\nEnvironmentFile=-/etc/expanse/daemon.env\n"));
  EXPECT_THAT(unit, HasSubstr("\nCapabilityBoundingSet=CAP_PERFMON CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, HasSubstr("\nAmbientCapabilities=CAP_PERFMON CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, HasSubstr("\nNoNewPrivileges=yes\nRestart=on-failure\nRestartSec=10s\n"));
  EXPECT_THAT(unit, HasSubstr("\n[Install]\nWantedBy=multi-user.target\n"));
  EXPECT_THAT(unit, Not(HasSubstr("EXPANSE_PROFILING_AGENT_ENABLE")));
}

TEST(RenderUnitTest, SamplerHasNoCredentialAndNoNetworkWait) {
  const std::string unit = Render(Sampler());
  EXPECT_THAT(unit, HasSubstr("Description=Expanse sampler"));
  EXPECT_THAT(unit, HasSubstr("\nExecStart=/srv/expanse/bin/expanse-daemon --role sampler "
                              "--shared-prefix /srv/expanse\n"));
  EXPECT_THAT(unit, HasSubstr("\nAfter=remote-fs.target\n"));
  EXPECT_THAT(unit,
              AllOf(Not(HasSubstr("network-online")), Not(HasSubstr("EXPANSE_DAEMON_CONFIG"))));
  EXPECT_THAT(unit, HasSubstr("\nAmbientCapabilities=CAP_PERFMON CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, HasSubstr("(systemctl edit expanse-sampler)"));
}

TEST(RenderUnitTest, UnitsNameTheNodesOwnCuptiHelper) {
  // %l: systemd puts the short host name there, so one unit serves every worker.
  for (const UnitOptions& options : {Controller(), Sampler()}) {
    EXPECT_THAT(Render(options), HasSubstr("\nEnvironment=EXPANSE_CUPTI_HELPER=/srv/expanse/lib/"
                                           "cupti-nodes/%l/bin/expanse-cupti-helper\n"));
  }
  // The setting comes before daemon.env, which may override it.
  const std::string unit = Render(Sampler());
  EXPECT_LT(unit.find("EXPANSE_CUPTI_HELPER"), unit.find("EnvironmentFile="));
  UnitOptions no_prefix = Controller();
  no_prefix.shared_prefix.clear();
  EXPECT_THAT(Render(no_prefix), Not(HasSubstr("EXPANSE_CUPTI_HELPER")));
}

TEST(RenderUnitTest, CuptiModeChoosesTheCapability) {
  UnitOptions options = Sampler();
  options.cupti_mode = CuptiMode::kSysadmin;
  std::string unit = Render(options);
  EXPECT_THAT(unit, HasSubstr("\nCapabilityBoundingSet=CAP_SYS_ADMIN CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, HasSubstr("\nAmbientCapabilities=CAP_SYS_ADMIN CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, Not(HasSubstr("CAP_PERFMON")));

  options.cupti_mode = CuptiMode::kNone;
  unit = Render(options);
  EXPECT_THAT(unit, HasSubstr("\nCapabilityBoundingSet=CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, HasSubstr("\nAmbientCapabilities=CAP_SYS_PTRACE\n"));
  EXPECT_THAT(unit, AllOf(Not(HasSubstr("CAP_PERFMON")), Not(HasSubstr("CAP_SYS_ADMIN"))));
}

TEST(RenderUnitTest, ProfilingAgentOffIsRecordedInTheUnit) {
  for (UnitOptions options : {Controller(), Sampler()}) {
    options.profiling_agent = false;
    EXPECT_THAT(Render(options), HasSubstr("\nEnvironment=EXPANSE_PROFILING_AGENT_ENABLE=0\n"));
  }
}

TEST(RenderUnitTest, ANamedSlurmConfIsPinnedForTheControllerOnly) {
  UnitOptions controller = Controller();
  EXPECT_THAT(Render(controller), Not(HasSubstr("SLURM_CONF")));  // SLURM's own discovery
  controller.slurm_conf = "/opt/slurm/etc/slurm.conf";
  const std::string unit = Render(controller);
  EXPECT_THAT(unit, HasSubstr("\nEnvironment=SLURM_CONF=/opt/slurm/etc/slurm.conf\n"));
  // Before daemon.env, so an operator's setting there still wins.
  EXPECT_LT(unit.find("SLURM_CONF="), unit.find("EnvironmentFile="));
  UnitOptions sampler = Sampler();
  sampler.slurm_conf = "/opt/slurm/etc/slurm.conf";
  EXPECT_THAT(Render(sampler), Not(HasSubstr("SLURM_CONF")));
  controller.slurm_conf = "etc/slurm.conf";
  EXPECT_THAT(RenderError(controller), HasSubstr("--slurm-conf"));
}

TEST(RenderUnitTest, ControllerWithoutSharedPrefixOmitsTheFlag) {
  UnitOptions options = Controller();
  options.shared_prefix.clear();
  EXPECT_THAT(Render(options),
              HasSubstr("\nExecStart=/srv/expanse/bin/expanse-daemon --role controller\n"));
}

TEST(RenderUnitTest, OtherEnvFileIsLoadedAndNamedToTheDaemon) {
  UnitOptions options = Sampler();
  options.env_file = "/tmp/test-root/daemon.env";
  const std::string unit = Render(options);
  EXPECT_THAT(unit, HasSubstr("\nEnvironmentFile=-/tmp/test-root/daemon.env\n"));
  EXPECT_THAT(unit, HasSubstr("--env-file /tmp/test-root/daemon.env\n"));
}

TEST(RenderUnitTest, RestartDelayIsWritten) {
  UnitOptions options = Controller();
  options.restart_delay = std::chrono::seconds(30);
  EXPECT_THAT(Render(options), HasSubstr("\nRestartSec=30s\n"));
}

// --- Quoting --------------------------------------------------------------------

TEST(RenderUnitTest, ExecStartArgumentsAreQuotedAndEscaped) {
  UnitOptions options = Sampler();
  options.shared_prefix = R"(/srv/my "exp" 100%\$HOME)";
  EXPECT_THAT(Render(options), HasSubstr(R"(--shared-prefix "/srv/my \"exp\" 100%%\\$$HOME")"
                                         "\n"));
}

TEST(RenderUnitTest, EnvironmentValuesAreQuotedWithoutDollarEscapes) {
  UnitOptions options = Controller();
  options.config_path = R"(/var/lib/my "x" 5%/$c.json)";
  EXPECT_THAT(Render(options),
              HasSubstr(R"(Environment="EXPANSE_DAEMON_CONFIG=/var/lib/my \"x\" 5%%/$c.json")"
                        "\n"));
}

TEST(RenderUnitTest, BinaryWithSpaceIsQuoted) {
  UnitOptions options = Controller();
  options.daemon_binary = "/opt/expanse daemon/bin/expanse-daemon";
  EXPECT_THAT(Render(options),
              HasSubstr("\nExecStart=\"/opt/expanse daemon/bin/expanse-daemon\" --role"));
}

// --- Header ---------------------------------------------------------------------

TEST(ManagedUnitFormatTest, RecognisesRenderedUnits) {
  EXPECT_EQ(ManagedUnitFormat(Render(Controller())), kUnitFormatVersion);
  EXPECT_EQ(ManagedUnitFormat(Render(Sampler())), kUnitFormatVersion);
  EXPECT_EQ(ManagedUnitFormat("# Managed by `expanse compute install` (unit format 12).\n"), 12);
}

TEST(ManagedUnitFormatTest, RejectsOtherUnits) {
  EXPECT_EQ(ManagedUnitFormat("[Unit]\nDescription=mine\n"), std::nullopt);
  EXPECT_EQ(ManagedUnitFormat(""), std::nullopt);
  EXPECT_EQ(ManagedUnitFormat("# Managed by `expanse compute install` (unit format x).\n"),
            std::nullopt);
  EXPECT_EQ(ManagedUnitFormat("\n# Managed by `expanse compute install` (unit format 1).\n"),
            std::nullopt);
}

// --- Validation -----------------------------------------------------------------

TEST(RenderUnitTest, RefusesBadPaths) {
  UnitOptions options = Controller();
  options.daemon_binary = "bin/expanse-daemon";
  EXPECT_EQ(RenderError(options), R"(daemon binary "bin/expanse-daemon" is not an absolute path)");
  options.daemon_binary = "/srv/expanse/bin/expanse-daemon\nExecStartPre=/bin/evil";
  EXPECT_EQ(
      RenderError(options),
      R"(daemon binary "/srv/expanse/bin/expanse-daemon\x0AExecStartPre=/bin/evil" contains a )"
      "control character (newline, tab, ...)");
  options.daemon_binary = "/srv/$X/expanse-daemon";
  EXPECT_THAT(RenderError(options), HasSubstr("contains '$'"));

  options = Sampler();
  options.shared_prefix = "/srv/../etc";
  EXPECT_EQ(RenderError(options), R"(--shared-prefix "/srv/../etc" contains a '..' component)");
  options.shared_prefix = std::string("/srv/\xff");
  EXPECT_EQ(RenderError(options), R"(--shared-prefix "/srv/\xFF" is not valid UTF-8)");
  options.shared_prefix.clear();
  EXPECT_THAT(RenderError(options), HasSubstr("--shared-prefix is required for the sampler"));
}

TEST(RenderUnitTest, RefusesBadUserNames) {
  UnitOptions options = Controller();
  for (const char* user : {"", "1slurm", "slurm user", "slurm\n", "a.b", "x$"}) {
    options.user = user;
    EXPECT_THAT(RenderError(options), HasSubstr("--user")) << user;
  }
  options.user = std::string(32, 'a');
  EXPECT_THAT(RenderError(options), HasSubstr("is longer than 31 characters"));
  for (const char* user : {"slurm", "_svc", "expanse-daemon", "Slurm_2"}) {
    options.user = user;
    EXPECT_THAT(Render(options), HasSubstr(std::string("\nUser=") + user + "\n")) << user;
  }
}

TEST(RenderUnitTest, ControllerNeedsALocalConfig) {
  UnitOptions options = Controller();
  options.config_path.clear();
  EXPECT_THAT(RenderError(options), HasSubstr("--config is required for the controller unit"));
  options.config_path = "/srv/expanse//state/config.json";
  EXPECT_THAT(RenderError(options),
              HasSubstr("lies on the shared prefix \"/srv/expanse\", which every worker can read"));
  options.config_path = "/srv/expanse-local/config.json";  // a sibling, not below the prefix
  EXPECT_THAT(Render(options), HasSubstr("EXPANSE_DAEMON_CONFIG=/srv/expanse-local/config.json"));
}

TEST(RenderUnitTest, SamplerRefusesAConfig) {
  UnitOptions options = Sampler();
  options.config_path = "/var/lib/slurm/.expanse/config.json";
  EXPECT_THAT(RenderError(options), HasSubstr("a sampler holds no credential"));
}

TEST(RenderUnitTest, RefusesOddEnvFileAndRestartDelay) {
  UnitOptions options = Controller();
  options.env_file = "/etc/expanse/daemon env";
  EXPECT_THAT(RenderError(options), HasSubstr("must consist of letters"));
  options = Controller();
  options.restart_delay = std::chrono::seconds(0);
  EXPECT_EQ(RenderError(options), "restart delay 0s is outside 1s..3600s");
}

TEST(ParseTest, RolesAndModes) {
  EXPECT_EQ(ParseUnitRole("sampler").value(), UnitRole::kSampler);
  EXPECT_EQ(ParseUnitRole("controller").value(), UnitRole::kController);
  EXPECT_EQ(ParseUnitRole("worker").status().message(),
            R"(--role "worker": expected controller or sampler)");
  EXPECT_EQ(ParseCuptiMode("none").value(), CuptiMode::kNone);
  EXPECT_EQ(ParseCuptiMode("sysadmin").value(), CuptiMode::kSysadmin);
  EXPECT_EQ(ParseCuptiMode("perfmon").value(), CuptiMode::kPerfmon);
  EXPECT_EQ(ParseCuptiMode("root").status().reason(), "invalid_cupti_mode");
  EXPECT_EQ(UnitName(UnitRole::kController), "expanse-daemon.service");
  EXPECT_EQ(UnitName(UnitRole::kSampler), "expanse-sampler.service");
}

// --- systemd-analyze verify -------------------------------------------------------
//
// `systemd-analyze verify` loads a unit file the way PID 1 would, without a running systemd
// (here PID 1 is not systemd): --man=no skips checking Documentation= pages, --generators=no
// keeps it from running the host's generators. It exits non-zero only for fatal problems (a
// missing ExecStart binary, unbalanced quoting) and merely logs others (an unknown key, an
// unknown capability), so any line on stderr fails the check too.

constexpr char kSystemdAnalyze[] = "/usr/bin/systemd-analyze";

// "" when systemd-analyze accepts `unit_text` as `name`, else what it said.
std::string Verify(const std::string& dir, const std::string& name, const std::string& unit_text) {
  EXPECT_TRUE(fs::WriteFileAtomically(dir, name, unit_text, 0644).ok());
  SubprocessOptions run;
  run.argv = {kSystemdAnalyze, "verify", "--man=no", "--generators=no", dir + "/" + name};
  // Warnings are logged at "warning" level; make sure a caller's setting cannot hide them.
  run.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "SYSTEMD_LOG_LEVEL=info",
                                     "SYSTEMD_LOG_COLOR=0"};
  run.timeout = std::chrono::seconds(60);
  Result<SubprocessResult> result = RunSubprocess(run);
  if (!result.ok())
    return "could not run systemd-analyze: " + result.status().ToString();
  if (result->Succeeded() && result->stderr_text.empty())
    return "";
  return "exit " + std::to_string(result->exit_code.value_or(-1)) + ": " + result->stderr_text +
         result->stdout_text;
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A missing tool is a broken test host, reported as a failure rather than a skip.
    ASSERT_EQ(access(kSystemdAnalyze, X_OK), 0) << kSystemdAnalyze << " is required";
    binary_ = dir_.path() + "/bin dir/expanse-daemon";
    ASSERT_TRUE(fs::MakeDirectories(dir_.path() + "/bin dir", 0755).ok());
    ASSERT_TRUE(fs::WriteFileAtomically(dir_.path() + "/bin dir", "expanse-daemon",
                                        "#!/bin/sh\nexit 0\n", 0755)
                    .ok());
  }

  UnitOptions Existing(UnitOptions options) const {
    options.daemon_binary = binary_;
    options.user = "root";  // User= must name an account that exists here
    return options;
  }

  TempDir dir_;
  std::string binary_;
};

TEST_F(VerifyTest, RenderedUnitsPassForEveryRoleAndMode) {
  for (UnitOptions options : {Controller(), Sampler()}) {
    for (CuptiMode mode : {CuptiMode::kPerfmon, CuptiMode::kSysadmin, CuptiMode::kNone}) {
      options.cupti_mode = mode;
      options.profiling_agent = mode != CuptiMode::kNone;
      options.shared_prefix = R"(/srv/odd "prefix" 100% $HOME\x)";
      const std::string name = std::string(UnitName(options.role));
      EXPECT_EQ(Verify(dir_.path(), name, Render(Existing(options))), "")
          << name << " cupti mode " << static_cast<int>(mode);
    }
  }
}

// The check itself must be able to fail: a bad unit is reported.
TEST_F(VerifyTest, ReportsBrokenUnits) {
  const std::string good = Render(Existing(Controller()));
  std::string missing_binary = good;
  missing_binary.replace(missing_binary.find(binary_), binary_.size(), dir_.path() + "/none");
  EXPECT_THAT(Verify(dir_.path(), "expanse-daemon.service", missing_binary),
              HasSubstr("is not executable"));

  std::string unknown_key = good;
  unknown_key.replace(unknown_key.find("NoNewPrivileges=yes"), 19, "NoNewPrivilege=yes");
  EXPECT_THAT(Verify(dir_.path(), "expanse-daemon.service", unknown_key), HasSubstr("Unknown key"));
}

}  // namespace
}  // namespace systemd_unit_test
}  // namespace expanse::install
