#include "attribution/gres_conf.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(GresConfTest, NodeNameHostlistsPickTheNodesLines) {
  constexpr std::string_view kConf =
      "# GPU nodes\n"
      "NodeName=gpu[01-04] Name=gpu Type=h200 File=/dev/nvidia[0-3] Cores=0-31\n"
      "NodeName=gpu[05-08] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
      "NodeName=gpu[05-08] Name=gpu Type=a100 File=/dev/nvidia3,/dev/nvidia2  # swapped\n"
      "Name=mps Count=400 File=/dev/nvidia[0-3]\n";
  const NodeGres gpu02 = ParseGresConf(kConf, "gpu02").value();
  EXPECT_FALSE(gpu02.auto_detect_nvidia);
  EXPECT_THAT(gpu02.files,
              ElementsAre(GresGpuFile{"/dev/nvidia0", 0}, GresGpuFile{"/dev/nvidia1", 1},
                          GresGpuFile{"/dev/nvidia2", 2}, GresGpuFile{"/dev/nvidia3", 3}));
  // GRES order is the order written, across lines: index 2 is /dev/nvidia3 here.
  EXPECT_THAT(ParseGresConf(kConf, "gpu06").value().files,
              ElementsAre(GresGpuFile{"/dev/nvidia0", 0}, GresGpuFile{"/dev/nvidia1", 1},
                          GresGpuFile{"/dev/nvidia3", 3}, GresGpuFile{"/dev/nvidia2", 2}));
  EXPECT_THAT(ParseGresConf(kConf, "gpu09").value().files, IsEmpty());
}

TEST(GresConfTest, TestClusterLayout) {
  // As tests/cluster/config.sh writes it: stand-in devices outside /dev, minors 2-3 on worker2.
  constexpr std::string_view kConf =
      "NodeName=worker1 Name=gpu File=/var/tmp/expanse-testcluster/hosts/worker1/dev/nvidia[0-1]\n"
      "NodeName=worker2 Name=gpu File=/var/tmp/expanse-testcluster/hosts/worker2/dev/nvidia[2-3]\n";
  const NodeGres worker2 = ParseGresConf(kConf, "worker2").value();
  ASSERT_EQ(worker2.files.size(), 2u);
  EXPECT_EQ(worker2.files[0].minor, 2u);
  EXPECT_EQ(worker2.files[1].minor, 3u);
}

TEST(GresConfTest, AutoDetect) {
  EXPECT_TRUE(ParseGresConf("AutoDetect=nvml\n", "any").value().auto_detect_nvidia);
  EXPECT_TRUE(ParseGresConf("autodetect=NVML\nName=gpu Type=h200 Count=8\n", "n1")
                  .value()
                  .auto_detect_nvidia);
  // A node's own setting beats the global one, whichever comes first.
  constexpr std::string_view kConf =
      "NodeName=old[1-2] AutoDetect=off\n"
      "AutoDetect=nvml\n"
      "NodeName=old[1-2] Name=gpu File=/dev/nvidia[0-1]\n";
  EXPECT_FALSE(ParseGresConf(kConf, "old1").value().auto_detect_nvidia);
  EXPECT_TRUE(ParseGresConf(kConf, "new1").value().auto_detect_nvidia);
  EXPECT_EQ(ParseGresConf("Name=gpu Type=h200 Count=8\n", "n1").value().gpus_without_file, 8u);
}

TEST(GresConfTest, CommentsContinuationsIncludes) {
  constexpr std::string_view kConf =
      "  # comment only\n"
      "\n"
      "Name=gpu \\\n"
      "  File=/dev/nvidia[0-1]\r\n"
      "Include /etc/slurm/gres.d/extra.conf\n";
  const NodeGres node = ParseGresConf(kConf, "n1").value();
  EXPECT_EQ(node.files.size(), 2u);
  EXPECT_THAT(node.includes, ElementsAre("/etc/slurm/gres.d/extra.conf"));
}

TEST(GresConfTest, SpecificErrors) {
  EXPECT_EQ(
      ParseGresConf("Name=gpu File=/dev/nvidia[0-3]\nName=gpu nonsense\n", "n1").status().message(),
      "gres.conf line 2: expected Key=Value, got \"nonsense\"");
  EXPECT_EQ(
      ParseGresConf("NodeName=gpu[01-04 Name=gpu File=/dev/nvidia0\n", "gpu01").status().message(),
      "gres.conf line 1: NodeName=: hostlist \"gpu[01-04\": '[' without ']'");
  EXPECT_EQ(ParseGresConf("Name=gpu File=/dev/dri/card[0-1]\n", "n1").status().message(),
            "gres.conf line 1: File= \"/dev/dri/card0\" is not an NVIDIA GPU device file "
            "(nvidia<N>)");
  EXPECT_EQ(ParseGresConf("Name=gpu File=/dev/nvidiactl\n", "n1").status().reason(),
            "gres_conf_malformed");
  EXPECT_EQ(ParseGresConf("Name=gpu File=/dev/nvidia[0-1]\nName=gpu File=/dev/nvidia1\n", "n1")
                .status()
                .message(),
            "gres.conf line 2: device file \"/dev/nvidia1\" is listed twice");
  EXPECT_EQ(ParseGresConf("Name=gpu File=/a/nvidia1,/b/nvidia1\n", "n1").status().message(),
            "gres.conf line 1: device file \"/b/nvidia1\" repeats minor 1");
  EXPECT_EQ(ParseGresConf("Name=gpu Count=4 File=/dev/nvidia[0-1]\n", "n1").status().message(),
            "gres.conf line 1: Count=4 but File= names 2 device files");
  EXPECT_EQ(ParseGresConf("NodeName=n1 AutoDetect=nvml\nNodeName=n[1-2] AutoDetect=off\n", "n1")
                .status()
                .message(),
            "gres.conf line 2: AutoDetect=\"off\" conflicts with AutoDetect=\"nvml\" set for "
            "this node earlier");
  const Status multiple =
      ParseGresConf("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/cap1\n", "n1").status();
  EXPECT_EQ(multiple.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(multiple.reason(), "gres_conf_unsupported");
  // Lines for other nodes are not held against this one.
  EXPECT_TRUE(ParseGresConf("NodeName=other Name=gpu MultipleFiles=/dev/nvidia0\n", "n1").ok());
}

TEST(GresConfTest, Limits) {
  EXPECT_EQ(ParseGresConf("Name=gpu File=/x/nvidia[250-255]\n", "n1").status().message(),
            "gres.conf line 1: File= \"/x/nvidia254\" is not an NVIDIA GPU device file "
            "(nvidia<N>)");
  EXPECT_EQ(ParseGresConf("Name=gpu File=/x/nvidia[0-999999]\n", "n1").status().message(),
            "gres.conf line 1: more than 1024 gpu device files for this node");
  const std::string big(kMaxGresConfBytes + 1, '#');
  EXPECT_EQ(ParseGresConf(big, "n1").status().reason(), "gres_conf_too_large");
}

}  // namespace
}  // namespace expanse::attribution
