#include "gpu/nvidia_smi_minor.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/nvidia_smi_test_util.h"

namespace expanse::gpu {
namespace nvidia_smi_minor_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

// /proc/driver/nvidia/gpus/0000:00:06.0/information as an H200 with driver 580.159.04 prints it
// (read on the device machine), with the minor changed from 0 to 5 so it differs from the index.
constexpr std::string_view kInformation =
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 41\n"
    "GPU UUID: \t GPU-0bae265c-555b-5a0c-03c7-8551e62ae474\n"
    "Video BIOS: \t 96.00.a5.00.1a\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:00:06.0\n"
    "Device Minor: \t 5\n"
    "GPU Firmware: \t 580.159.04\n"
    "GPU Excluded:\t No\n";

TEST(NvidiaSmiMinorTest, ParsesProcfsInformation) {
  EXPECT_THAT(ParseProcfsDeviceMinor(kInformation).value(), 5u);
  EXPECT_EQ(ParseProcfsDeviceMinor("Model: x\n").status().message(),
            "nvidia procfs information: no \"Device Minor:\" line");
  EXPECT_EQ(ParseProcfsDeviceMinor("Device Minor: \t two\n").status().message(),
            "nvidia procfs information line 1: expected a minor number after \"Device Minor:\", "
            "got \"two\"");
}

TEST(NvidiaSmiMinorTest, BusIdCandidates) {
  EXPECT_THAT(ProcfsBusIdCandidates("00000000:00:06.0"),
              ElementsAre("00000000:00:06.0", "0000:00:06.0"));
  EXPECT_THAT(ProcfsBusIdCandidates("00000000:3B:00.0"),
              ElementsAre("00000000:3B:00.0", "0000:3b:00.0"));
  EXPECT_THAT(ProcfsBusIdCandidates("00010000:01:00.0"),
              ElementsAre("00010000:01:00.0", "10000:01:00.0"));
  EXPECT_THAT(ProcfsBusIdCandidates("0000:3b:00.0"), ElementsAre("0000:3b:00.0"));
  EXPECT_THAT(ProcfsBusIdCandidates("../../etc"), IsEmpty());
  EXPECT_THAT(ProcfsBusIdCandidates(""), IsEmpty());
}

TEST(NvidiaSmiMinorTest, MinorFromProcfs) {
  const testing::TempDir proc;
  testing::WriteFile(proc.path() + "/driver/nvidia/gpus/0000:3b:00.0/information", kInformation);
  EXPECT_THAT(MinorFromProcfs(proc.path(), "00000000:3B:00.0"), Optional(5u));
  EXPECT_THAT(MinorFromProcfs(proc.path(), "0000:3b:00.0"), Optional(5u));
  EXPECT_EQ(MinorFromProcfs(proc.path(), "00000000:3C:00.0"), std::nullopt);
  testing::WriteFile(proc.path() + "/driver/nvidia/gpus/0000:3c:00.0/information", "garbage\n");
  EXPECT_EQ(MinorFromProcfs(proc.path(), "00000000:3C:00.0"), std::nullopt);
  EXPECT_EQ(MinorFromProcfs("/nonexistent", "00000000:3B:00.0"), std::nullopt);
}

MATCHER_P2(IsMinor, bus_id, minor, "") { return arg.pci_bus_id == bus_id && arg.minor == minor; }

TEST(NvidiaSmiMinorTest, XmlFixture) {
  const Result<std::vector<XmlGpuMinor>> minors =
      ParseXmlMinorNumbers(testing::FixtureOutput("nvsmi_q.xml"));
  ASSERT_TRUE(minors.ok()) << minors.status();
  EXPECT_THAT(*minors, ElementsAre(IsMinor("00000000:00:06.0", 0u)));
}

TEST(NvidiaSmiMinorTest, XmlEdgeCases) {
  const std::string two_gpus =
      "<gpu id=\"00000000:3B:00.0\">\n<minor_number>3</minor_number>\n</gpu>\n"
      "<gpu id=\"00000000:3C:00.0\">\n<minor_number>N/A</minor_number>\n</gpu>\n"
      "<gpu id=\"00000000:3D:00.0\">\n</gpu>\n"
      "<gpu id=\"00000000:3E:00.0\">\n<minor_number> 2 </minor_number>\n</gpu>\n";
  EXPECT_THAT(ParseXmlMinorNumbers(two_gpus).value(),
              ElementsAre(IsMinor("00000000:3B:00.0", 3u), IsMinor("00000000:3E:00.0", 2u)));
  EXPECT_THAT(ParseXmlMinorNumbers("").value(), IsEmpty());
  EXPECT_EQ(ParseXmlMinorNumbers("<gpu id=\"0000").status().message(),
            "nvidia-smi -q -x: unterminated <gpu id=\"...\">");
  EXPECT_EQ(ParseXmlMinorNumbers("<gpu id=\"A\"><minor_number>1").status().message(),
            "nvidia-smi -q -x: unterminated <minor_number> of GPU \"A\"");
  EXPECT_EQ(
      ParseXmlMinorNumbers("<gpu id=\"A\"><minor_number>-1</minor_number>").status().message(),
      "nvidia-smi -q -x: <minor_number> of GPU \"A\": expected a number, got \"-1\"");
}

}  // namespace
}  // namespace nvidia_smi_minor_test
}  // namespace expanse::gpu
