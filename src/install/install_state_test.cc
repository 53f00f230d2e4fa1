#include "install/install_state.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::install {
namespace install_state_test {
namespace {

InstallState Controller() {
  InstallState s;
  s.role = "controller";
  s.daemon_version = "1.8.0";
  s.highest_version = "1.8.0";
  s.shared_prefix = "/srv/expanse";
  s.config_path = "/var/lib/slurm/.expanse/config.json";
  s.user = "slurm";
  s.unit_name = "expanse-controller.service";
  s.unit_path = "/etc/systemd/system/expanse-controller.service";
  s.slurm_conf = "/etc/slurm/slurm.conf";
  s.wired_files = {"/etc/slurm/slurm.conf"};
  s.files = {"/srv/expanse/bin/expanse-daemon"};
  s.trees = {"/srv/expanse/cupti"};
  s.profiling_agent = false;
  s.cupti_mode = "auto";
  s.cupti_variant = "cuda1300";
  s.bundled_pyspy = false;
  s.installed_ms = 1'800'000'000'000;
  return s;
}

TEST(InstallStateTest, RoundTrips) {
  Result<InstallState> parsed = ParseInstallState(RenderInstallState(Controller()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(RenderInstallState(*parsed), RenderInstallState(Controller()));
  EXPECT_FALSE(parsed->profiling_agent);
  EXPECT_EQ(parsed->trees, std::vector<std::string>{"/srv/expanse/cupti"});
  EXPECT_EQ(parsed->cupti_variant, "cuda1300");
  EXPECT_FALSE(parsed->bundled_pyspy);
}

// A state an older installer wrote lacks what was recorded later: read as what it then did.
TEST(InstallStateTest, AnOlderStateReadsAsItsInstallerBehaved) {
  std::string text = RenderInstallState(Controller());
  for (const std::string member :
       {R"("cupti_variant": "cuda1300",)", R"("bundled_pyspy": false,)"}) {
    const size_t at = text.find(member);
    ASSERT_NE(at, std::string::npos) << member;
    text.erase(at, member.size());
  }
  Result<InstallState> parsed = ParseInstallState(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->cupti_variant, "");
  EXPECT_TRUE(parsed->bundled_pyspy);
}

// Each of these made nlohmann throw inside the parser (caught there, but only by a catch-all
// around it); now each is a refusal that names the member.
TEST(InstallStateTest, WronglyTypedMembersAreRefusedByName) {
  const std::string good = RenderInstallState(Controller());
  for (const auto& [from, to, named] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {R"("user": "slurm")", R"("user": 5)", "install state.user must be a string"},
           {R"("files": [)", R"("files": 7, "x": [)", "install state.files must be an array"},
           {R"("profiling_agent": false)", R"("profiling_agent": "no")",
            "install state.profiling_agent must be true or false"},
           {R"("installed_ms": 1800000000000)", R"("installed_ms": -1)",
            "install state.installed_ms must be an integer"},
       }) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    Result<InstallState> parsed = ParseInstallState(text);
    ASSERT_FALSE(parsed.ok()) << to;
    EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(parsed.status().message().find(named), std::string::npos) << parsed.status();
  }
}

TEST(InstallStateTest, RefusesOtherFormatsRolesAndRelativePaths) {
  EXPECT_FALSE(ParseInstallState(R"({"format":2,"role":"controller"})").ok());
  EXPECT_FALSE(ParseInstallState("[]").ok());
  EXPECT_FALSE(ParseInstallState(std::string(100'000, '[')).ok());
  InstallState odd = Controller();
  odd.role = "worker";
  EXPECT_NE(ParseInstallState(RenderInstallState(odd)).status().message().find("unknown role"),
            std::string::npos);
  InstallState relative = Controller();
  relative.files = {"srv/expanse/bin/expanse-daemon"};
  EXPECT_NE(ParseInstallState(RenderInstallState(relative)).status().message().find("not absolute"),
            std::string::npos);
}

}  // namespace
}  // namespace install_state_test
}  // namespace expanse::install
