#include "doctor_cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::install {
namespace {

using ::testing::ElementsAre;

InstallState Controller() {
  InstallState state;
  state.role = "controller";
  state.shared_prefix = "/srv/expanse";
  state.config_path = "/var/lib/slurm/.expanse/config.json";
  state.user = "slurm";
  return state;
}

TEST(DoctorCli, RunsTheInstalledDaemonWithTheInstallsPaths) {
  DoctorCli cli;
  cli.args = {"--json"};
  Result<std::vector<std::string>> argv = DoctorDaemonArgv(cli, Controller(), std::nullopt);
  ASSERT_TRUE(argv.ok());
  EXPECT_THAT(*argv, ElementsAre("/srv/expanse/bin/expanse-daemon", "doctor", "--shared-prefix",
                                 "/srv/expanse", "--config", "/var/lib/slurm/.expanse/config.json",
                                 "--user", "slurm", "--install-state",
                                 "/var/lib/expanse-install/controller.json", "--json"));
}

TEST(DoctorCli, TheOperatorsFlagsWin) {
  DoctorCli cli;
  cli.daemon = "/opt/expanse-daemon";
  cli.args = {"--shared-prefix=/other", "--host", "w1"};
  Result<std::vector<std::string>> argv = DoctorDaemonArgv(cli, Controller(), std::nullopt);
  ASSERT_TRUE(argv.ok());
  EXPECT_THAT(*argv, ElementsAre("/opt/expanse-daemon", "doctor", "--config",
                                 "/var/lib/slurm/.expanse/config.json", "--user", "slurm",
                                 "--install-state", "/var/lib/expanse-install/controller.json",
                                 "--shared-prefix=/other", "--host", "w1"));
}

TEST(DoctorCli, NoInstallAndNoDaemonIsAUsageError) {
  DoctorCli cli;
  Result<std::vector<std::string>> argv = DoctorDaemonArgv(cli, std::nullopt, std::nullopt);
  ASSERT_FALSE(argv.ok());
  EXPECT_EQ(argv.status().reason(), "usage");
  EXPECT_THAT(argv.status().message(), ::testing::HasSubstr("--daemon"));
}

}  // namespace
}  // namespace expanse::install
