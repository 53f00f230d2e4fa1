#include "agent/capabilities.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::agent {
namespace capabilities_test {
namespace {

using ::testing::HasSubstr;

class CapabilitiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-caps-XXXXXX";
    dir_ = mkdtemp(dir);
    inputs_.hostname = "gpu07";
    inputs_.gpu.backend = "nvml";
    inputs_.gpu.state = "ok";
    inputs_.gpu.gpus = 8;
    inputs_.path_env = dir_ + "/bin";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void MakeExecutable(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), 0755);
  }
  std::string dir_;
  CapabilityInputs inputs_;
};

TEST_F(CapabilitiesTest, NothingOptionalInstalled) {
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["nvml"].state, "ok");
  EXPECT_EQ(caps["nvml"].reason, "8 GPUs");
  EXPECT_EQ(caps["nvidia_smi"].state, "absent");
  EXPECT_EQ(caps["cupti"].state, "absent");
  EXPECT_THAT(caps["cupti"].reason, HasSubstr("expanse-cupti-helper not found"));
  EXPECT_EQ(caps["dcgm"].state, "absent");
  EXPECT_THAT(caps["dcgm"].reason, HasSubstr("dcgmi not found"));
  // The native reader needs nothing installed.
  EXPECT_EQ(caps["py_stacks"].state, "ok");
  EXPECT_EQ(caps["py_stacks"].reason, "native CPython reader");
  EXPECT_EQ(caps["profiling_permissions"].state, "ok");
}

// Without a helper, the node's CUPTI note says why: what its install or last Prolog found.
TEST_F(CapabilitiesTest, AMissingHelperQuotesTheNodesCuptiNote) {
  inputs_.shared_prefix = dir_ + "/prefix";
  const std::string node = inputs_.shared_prefix + "/lib/cupti-nodes/gpu07";
  std::filesystem::create_directories(node);
  std::ofstream(node + "/NOTE") << "CUPTI: no NVIDIA driver found on this node\x1b[2J\n";
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["cupti"].state, "absent");
  EXPECT_EQ(caps["cupti"].reason, "expanse-cupti-helper not found at " + node +
                                      "/bin/expanse-cupti-helper; CUPTI: no NVIDIA driver found "
                                      "on this node?[2J");
}

// What the service would refuse to run is described as refused, not as merely not running.
TEST_F(CapabilitiesTest, ARefusedDcgmiOrAHelperThatIsNoFileIsSaidSo) {
  MakeExecutable(dir_ + "/bin/dcgmi");
  chmod((dir_ + "/bin/dcgmi").c_str(), 0777);
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["dcgm"].state, "degraded");
  EXPECT_THAT(caps["dcgm"].reason, HasSubstr("dcgmi refused, not run: "));
  inputs_.settings.cupti_helper = dir_;  // a directory
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["cupti"].state, "absent");
  EXPECT_EQ(caps["cupti"].reason, "expanse-cupti-helper at " + dir_ + " is not a regular file");
  inputs_.settings.cupti_helper = "sh";  // found from the working directory or PATH: never run
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["cupti"].reason, "EXPANSE_CUPTI_HELPER=sh is not an absolute path; not run");
}

TEST_F(CapabilitiesTest, DcgmIsWhatTheRunningEnrichmentSaysElseWhereDcgmiIs) {
  MakeExecutable(dir_ + "/bin/dcgmi");
  auto caps = DescribeCapabilities(inputs_);
  // Found, but only the service that runs it can say whether the host engine answers.
  EXPECT_EQ(caps["dcgm"].state, "degraded");
  EXPECT_THAT(caps["dcgm"].reason,
              HasSubstr("dcgmi at " + dir_ + "/bin/dcgmi (engine localhost:5555)"));
  inputs_.dcgm = Capability{"ok", "dcgmi dmon on 8 GPUs (engine localhost:5555)"};
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["dcgm"].state, "ok");
  EXPECT_EQ(caps["dcgm"].reason, "dcgmi dmon on 8 GPUs (engine localhost:5555)");
  // EXPANSE_DCGMI naming a program that is not there.
  inputs_.dcgm.reset();
  inputs_.settings.dcgmi = dir_ + "/nowhere/dcgmi";
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["dcgm"].state, "absent");
  EXPECT_THAT(caps["dcgm"].reason,
              HasSubstr("EXPANSE_DCGMI=" + dir_ + "/nowhere/dcgmi is not executable"));
}

TEST_F(CapabilitiesTest, SettingsDisableAndPointAtTools) {
  inputs_.shared_prefix = dir_ + "/prefix";
  MakeExecutable(inputs_.shared_prefix + "/bin/py-spy");
  MakeExecutable(dir_ + "/bin/dcgmi");
  inputs_.settings.cupti_enable = false;
  inputs_.settings.profiling_agent_enable = false;
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["cupti"].state, "disabled");
  EXPECT_EQ(caps["cupti"].reason, "EXPANSE_CUPTI_ENABLE=0");
  EXPECT_EQ(caps["profiling_permissions"].state, "disabled");
  EXPECT_EQ(caps["py_stacks"].state, "ok");
  EXPECT_THAT(caps["py_stacks"].reason, HasSubstr(inputs_.shared_prefix + "/bin/py-spy"));
  EXPECT_THAT(caps["dcgm"].reason, HasSubstr(dir_ + "/bin/dcgmi"));

  inputs_.settings.pyspy = dir_ + "/missing-py-spy";
  inputs_.settings.pystacks_backend = "py-spy";
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["py_stacks"].state, "absent");
  EXPECT_THAT(caps["py_stacks"].reason, HasSubstr("EXPANSE_PYSPY="));

  inputs_.settings.pystacks_enable = false;
  EXPECT_EQ(DescribeCapabilities(inputs_)["py_stacks"].state, "disabled");
  // A running collector's own account wins.
  inputs_.py_stacks = Capability{"degraded", "py_stacks: ptrace denied for pid 7: EPERM"};
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["py_stacks"].state, "degraded");
  EXPECT_EQ(caps["py_stacks"].reason, "py_stacks: ptrace denied for pid 7: EPERM");
}

// The report makes the collector's own py-spy lookup: a bare EXPANSE_PYSPY is a program on
// PATH (it used to be called "not executable" while the collector ran it), and a relative
// path is refused with the collector's message.
TEST_F(CapabilitiesTest, PyspyIsFoundAsTheCollectorFindsIt) {
  MakeExecutable(dir_ + "/bin/py-spy");
  inputs_.settings.pystacks_backend = "py-spy";
  inputs_.settings.pyspy = "py-spy";
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["py_stacks"].state, "ok");
  EXPECT_EQ(caps["py_stacks"].reason, "py-spy at " + dir_ + "/bin/py-spy");
  inputs_.settings.pyspy = "bin/py-spy";
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["py_stacks"].state, "absent");
  EXPECT_THAT(caps["py_stacks"].reason, HasSubstr("expected an absolute path"));
  inputs_.settings.pyspy = "";  // PATH
  EXPECT_EQ(DescribeCapabilities(inputs_)["py_stacks"].reason, "py-spy at " + dir_ + "/bin/py-spy");
  std::filesystem::remove(dir_ + "/bin/py-spy");
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["py_stacks"].state, "absent");
  EXPECT_THAT(caps["py_stacks"].reason, HasSubstr("py-spy not found"));
}

TEST_F(CapabilitiesTest, GpuStatesFollowTheSampler) {
  inputs_.gpu.backend = "";
  inputs_.gpu.state = "no_gpus";
  inputs_.gpu.detail = "no GPUs: nvml: cannot load libnvidia-ml.so.1";
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["nvml"].state, "absent");
  EXPECT_THAT(caps["nvml"].reason, HasSubstr("no GPUs"));
  inputs_.gpu.backend = "nvidia-smi";
  inputs_.gpu.state = "degraded";
  inputs_.gpu.detail = "nvidia-smi timed out";
  caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["nvidia_smi"].state, "degraded");
  EXPECT_EQ(caps["nvml"].state, "absent");
  const nlohmann::json json = CapabilitiesJson(caps);
  EXPECT_EQ(json["nvidia_smi"]["reason"], "nvidia-smi timed out");
}

TEST_F(CapabilitiesTest, PermissionProblemDegrades) {
  inputs_.profiling_permissions_problem = "missing o+x on /var/lib/expanse";
  auto caps = DescribeCapabilities(inputs_);
  EXPECT_EQ(caps["profiling_permissions"].state, "degraded");
  EXPECT_EQ(caps["profiling_permissions"].reason, "missing o+x on /var/lib/expanse");
}

}  // namespace
}  // namespace capabilities_test
}  // namespace expanse::agent
