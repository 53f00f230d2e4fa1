#include "install/install_options.h"

#include <gtest/gtest.h>

namespace expanse::install {
namespace install_options_test {
namespace {

bool Mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& p : problems) {
    if (p.find(text) != std::string::npos)
      return true;
  }
  return false;
}

InstallOptions Valid() {
  InstallOptions o;
  o.type = "slurm";
  o.shared_prefix = "/srv/expanse";
  o.daemon_version = "1.2.0";
  return o;
}

TEST(InstallOptionsTest, TheGuidesDefaultsAreValid) {
  EXPECT_TRUE(CheckInstallFlags(Valid()).empty());
  InstallOptions o;
  EXPECT_EQ(o.role, "controller");
  EXPECT_EQ(o.user, "slurm");
  EXPECT_FALSE(o.patch_slurm_conf);
  EXPECT_TRUE(o.reconfigure);
  EXPECT_TRUE(o.systemd);
  EXPECT_EQ(o.heartbeat_timeout, std::chrono::minutes(1));
  EXPECT_EQ(o.sampler_bootstrap, "prolog");
  EXPECT_EQ(o.cupti_mode, "perfmon");
  EXPECT_TRUE(o.profiling_agent);
  EXPECT_TRUE(o.bundled_pyspy);
  EXPECT_EQ(o.releases_url, "https://releases.expanse.sh");
  EXPECT_FALSE(o.reinstall);
  EXPECT_FALSE(o.write_config_only);
  EXPECT_EQ(EffectiveConfigPath(""), "/var/lib/slurm/.expanse/config.json");
}

TEST(InstallOptionsTest, ContradictionsAreAllReportedBeforeAnythingRuns) {
  InstallOptions o = Valid();
  o.daemon_binary = "/tmp/expanse-daemon.tar.gz";
  o.shared_prefix = "srv/expanse";
  o.role = "worker";
  o.cupti_mode = "root";
  auto problems = CheckInstallFlags(o);
  EXPECT_TRUE(Mentions(problems, "mutually exclusive"));
  EXPECT_TRUE(Mentions(problems, "--shared-prefix must be an absolute path"));
  EXPECT_TRUE(Mentions(problems, "--role 'worker' is unknown"));
  EXPECT_TRUE(Mentions(problems, "--cupti-mode 'root' is unknown"));
}

// The unit's User= rule, checked before anything changes: "svc.expanse" passed the flag check,
// spent the install token, and was refused only when the unit was rendered.
TEST(InstallOptionsTest, TheUserIsCheckedByTheUnitsRuleUpFront) {
  for (const char* refused : {"svc.expanse", "1slurm", "slurm user", ""}) {
    InstallOptions o = Valid();
    o.user = refused;
    EXPECT_TRUE(Mentions(CheckInstallFlags(o), "--user")) << refused;
    UninstallOptions u;
    u.user = refused;
    if (*refused != '\0') {
      EXPECT_TRUE(Mentions(CheckUninstallFlags(u), "--user")) << refused;
    }
  }
  for (const char* accepted : {"slurm", "_svc", "expanse-daemon", "Slurm_2"}) {
    InstallOptions o = Valid();
    o.user = accepted;
    EXPECT_TRUE(CheckInstallFlags(o).empty()) << accepted;
  }
}

TEST(InstallOptionsTest, TheCredentialMayNotLiveOnTheSharedMount) {
  InstallOptions o = Valid();
  o.config_path = "/srv/expanse/config.json";
  EXPECT_TRUE(Mentions(CheckInstallFlags(o), "on the shared mount"));
}

TEST(InstallOptionsTest, NoTypeMeansConfigOnly) {
  InstallOptions o;
  EXPECT_TRUE(ConfigOnly(o));
  o.type = "slurm";
  EXPECT_FALSE(ConfigOnly(o));
  o.write_config_only = true;
  EXPECT_TRUE(ConfigOnly(o));
}

TEST(InstallOptionsTest, ASamplerNeedsThePrefixAndNoCredential) {
  InstallOptions o;
  o.type = "slurm";
  o.role = "sampler";
  EXPECT_TRUE(Mentions(CheckInstallFlags(o), "needs --shared-prefix"));
  o.shared_prefix = "/srv/expanse";
  EXPECT_TRUE(CheckInstallFlags(o).empty());
  o.write_config_only = true;
  EXPECT_FALSE(CheckInstallFlags(o).empty());
}

TEST(InstallOptionsTest, UrlsAndVersionsAreChecked) {
  InstallOptions o = Valid();
  o.control_plane = "ftp://cp";
  o.daemon_version = "latest";
  auto problems = CheckInstallFlags(o);
  EXPECT_TRUE(Mentions(problems, "--control-plane must be an https:// URL"));
  EXPECT_TRUE(Mentions(problems, "is not a version"));
  // As the console's install script writes them (deploy/templates.cc applies the same rule).
  for (const char* written : {"v1.8.0", "1.8.0+build.7", "1.8.0-rc.1"}) {
    o = Valid();
    o.daemon_version = written;
    EXPECT_TRUE(CheckInstallFlags(o).empty()) << written;
  }
}

}  // namespace
}  // namespace install_options_test
}  // namespace expanse::install
