// `compute install` and `compute uninstall` parse the guide's flags into the options the
// installer acts on: its defaults, its aliases and its boolean forms.
#include "compute_cli.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::install {
namespace {

// Parses `expanse compute <args>`; the caller checks `commands`.
class ComputeCliTest : public ::testing::Test {
 protected:
  void Parse(std::vector<std::string> args) {
    app_ = std::make_unique<CLI::App>("test", "expanse");  // owns the commands' pointers
    CLI::App* compute = app_->add_subcommand("compute");
    compute->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    AddComputeCommands(*compute, commands_);
    args.insert(args.begin(), "compute");
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    app_->parse(args);
  }
  std::unique_ptr<CLI::App> app_;
  ComputeCommands commands_;
};

TEST_F(ComputeCliTest, InstallDefaultsAreTheGuides) {
  Parse({"install"});
  const InstallOptions& in = commands_.install;
  EXPECT_TRUE(commands_.install_command->parsed());
  EXPECT_EQ(in.type, "") << "unset: config only";
  EXPECT_EQ(in.role, "controller");
  EXPECT_EQ(in.user, "slurm");
  EXPECT_FALSE(in.patch_slurm_conf);
  EXPECT_TRUE(in.reconfigure);
  EXPECT_TRUE(in.systemd);
  EXPECT_EQ(commands_.heartbeat_timeout, "1m");
  EXPECT_EQ(in.sampler_bootstrap, "prolog");
  EXPECT_EQ(in.cupti_variant, "") << "automatic";
  EXPECT_EQ(in.cupti_mode, "perfmon");
  EXPECT_TRUE(in.profiling_agent);
  EXPECT_TRUE(in.bundled_pyspy);
  EXPECT_EQ(in.releases_url, "https://releases.expanse.sh");
  EXPECT_FALSE(in.reinstall);
  EXPECT_FALSE(in.write_config_only);
  EXPECT_FALSE(in.verbose);
}

TEST_F(ComputeCliTest, ForceIsAnAliasForReinstall) {
  Parse({"install", "--type", "slurm", "--force"});
  EXPECT_TRUE(commands_.install.reinstall);
  commands_ = ComputeCommands{};
  Parse({"install", "--reinstall"});
  EXPECT_TRUE(commands_.install.reinstall);
}

TEST_F(ComputeCliTest, BooleansTakeTheGuidesForms) {
  Parse({"install", "--type", "slurm", "--reconfigure=false", "--write-config-only",
         "--patch-slurm-conf=true", "--profiling-agent=false", "--systemd=false",
         "--bundled-pyspy=false", "--verbose"});
  const InstallOptions& in = commands_.install;
  EXPECT_FALSE(in.reconfigure);
  EXPECT_TRUE(in.write_config_only);
  EXPECT_TRUE(ConfigOnly(in)) << "--write-config-only wins over --type slurm";
  EXPECT_TRUE(in.patch_slurm_conf);
  EXPECT_FALSE(in.profiling_agent);
  EXPECT_FALSE(in.systemd);
  EXPECT_FALSE(in.bundled_pyspy);
  EXPECT_TRUE(in.verbose);
}

TEST_F(ComputeCliTest, ARepeatedFlagTakesItsLastValue) {
  Parse({"install", "--cupti-mode", "sysadmin", "--cupti-mode", "none", "--reconfigure=false",
         "--reconfigure=true", "--cupti-variant", "cuda1300", "--config", "/etc/x/config.json",
         "--user", "gpumon", "--heartbeat-timeout", "90s"});
  const InstallOptions& in = commands_.install;
  EXPECT_EQ(in.cupti_mode, "none");
  EXPECT_TRUE(in.reconfigure);
  EXPECT_EQ(in.cupti_variant, "cuda1300");
  EXPECT_EQ(in.config_path, "/etc/x/config.json");
  EXPECT_EQ(in.user, "gpumon");
  EXPECT_EQ(commands_.heartbeat_timeout, "90s");
}

TEST_F(ComputeCliTest, UninstallFlags) {
  Parse({"uninstall", "--type", "slurm", "--role", "sampler", "--shared-prefix", "/srv/expanse",
         "--reconfigure=false", "--keep-identity"});
  const UninstallOptions& un = commands_.uninstall;
  EXPECT_TRUE(commands_.uninstall_command->parsed());
  EXPECT_FALSE(commands_.install_command->parsed());
  EXPECT_EQ(un.role, "sampler");
  EXPECT_EQ(un.shared_prefix, "/srv/expanse");
  EXPECT_FALSE(un.reconfigure);
  EXPECT_TRUE(un.keep_identity);
}

TEST_F(ComputeCliTest, AnUnknownFlagIsRefused) {
  EXPECT_THROW(Parse({"install", "--forse"}), CLI::ParseError);
}

}  // namespace
}  // namespace expanse::install
