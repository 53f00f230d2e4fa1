#include "dcgm/discovery_parser.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dcgm/fixture_test_util.h"

namespace expanse::dcgm {
namespace discovery_parser_test {
namespace {

using ::testing::HasSubstr;

std::vector<DiscoveredGpu> ParseOk(std::string_view text) {
  Result<std::vector<DiscoveredGpu>> gpus = ParseDiscoveryList(text);
  EXPECT_TRUE(gpus.ok()) << gpus.status();
  return gpus.ok() ? *std::move(gpus) : std::vector<DiscoveredGpu>{};
}

std::string Malformed(std::string_view text) {
  Result<std::vector<DiscoveredGpu>> gpus = ParseDiscoveryList(text);
  if (gpus.ok())
    return "<parsed>";
  EXPECT_EQ(gpus.status().code(), StatusCode::kInvalidArgument) << gpus.status();
  EXPECT_EQ(gpus.status().reason(), "dcgmi_discovery_output");
  return gpus.status().message();
}

constexpr std::string_view kRule =
    "+--------+----------------------------------------------------------------------+\n";
constexpr std::string_view kLabels =
    "| GPU ID | Device Information                                                   |\n";

std::string Row(std::string_view id, std::string_view info) {
  std::string row =
      "| " + std::string(id) + std::string(6 - id.size(), ' ') + " | " + std::string(info);
  if (info.size() < 68)
    row += std::string(68 - info.size(), ' ');
  return row + " |\n";
}

TEST(DiscoveryParserTest, TwoH200s) {
  const std::vector<DiscoveredGpu> gpus =
      ParseOk(testing::ReadFixture("discovery_list.txt").output);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].gpu_id, 0u);
  EXPECT_EQ(gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:00:06.0");
  EXPECT_EQ(gpus[0].uuid, "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0");
  EXPECT_EQ(gpus[1].gpu_id, 1u);
  EXPECT_EQ(gpus[1].uuid, "GPU-0d3c3a2e-9b1f-4b7e-8f55-2a61c9d0e4b7");
}

TEST(DiscoveryParserTest, OlderCountLineAndInactiveGpus) {
  // 3.x prints "1 GPU found."; with -a, 4.x adds a status and "(last known)" to a lost GPU.
  const std::string text = "1 GPU found.\n" + std::string(kRule) + std::string(kLabels) +
                           std::string(kRule) + Row("3", "Status: Lost") +
                           Row("", "Name: NVIDIA A100-SXM4-80GB (last known)") +
                           Row("", "PCI Bus ID: 00000000:07:00.0 (last known)") +
                           Row("", "Device UUID: GPU-abcdef01-2345-6789-abcd-ef0123456789") +
                           std::string(kRule) + "0 NvSwitches found.\n";
  const std::vector<DiscoveredGpu> gpus = ParseOk(text);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].gpu_id, 3u);
  EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:07:00.0");
}

TEST(DiscoveryParserTest, NoteAndUnreadableGpu) {
  const std::string text =
      "2 GPUs found (Active).\nNote: Use -a flag to show all GPUs, including those that are not "
      "active.\n" +
      std::string(kRule) + std::string(kLabels) + std::string(kRule) +
      Row("0", "Error: Cannot get device attributes for GPU.") +
      Row("", "Return: Host engine connection invalid/disconnected") + std::string(kRule) +
      Row("1", "Name: NVIDIA H200") + Row("", "Device UUID: GPU-0d3c3a2e-9b1f") +
      std::string(kRule);
  const std::vector<DiscoveredGpu> gpus = ParseOk(text);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].uuid, "");  // no attributes: no UUID to map it by
  EXPECT_EQ(gpus[1].uuid, "GPU-0d3c3a2e-9b1f");
}

TEST(DiscoveryParserTest, NoGpus) {
  const std::string text = "0 GPUs found (Active).\n" + std::string(kRule) + std::string(kLabels) +
                           std::string(kRule) + std::string(kRule) + "0 NvSwitches found.\n";
  EXPECT_TRUE(ParseOk(text).empty());
}

TEST(DiscoveryParserTest, EngineUnreachable) {
  Result<std::vector<DiscoveredGpu>> gpus = ParseDiscoveryList(
      "Error: unable to establish a connection to the specified host: localhost:5555\n"
      "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n");
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(gpus.status().reason(), "engine_unreachable");
}

TEST(DiscoveryParserTest, Malformed) {
  const std::string head =
      "1 GPU found.\n" + std::string(kRule) + std::string(kLabels) + std::string(kRule);
  EXPECT_THAT(Malformed(""), HasSubstr("no \"GPUs found\" line"));
  EXPECT_THAT(Malformed("hello\n"), HasSubstr("no \"GPUs found\" line"));
  EXPECT_THAT(Malformed(head + std::string(kRule)), HasSubstr("1 GPUs found but 0 listed"));
  EXPECT_THAT(Malformed(head + Row("0", "Name: a") + Row("1", "Name: b")),
              HasSubstr("more GPUs listed than the 1 found"));
  EXPECT_THAT(Malformed(head + Row("", "Name: a")), HasSubstr("before any GPU ID"));
  EXPECT_THAT(Malformed(head + Row("x", "Name: a")), HasSubstr("not a GPU ID: \"x\""));
  EXPECT_THAT(Malformed(head + Row("0", "Device UUID: GPU-xyz")), HasSubstr("not a GPU UUID"));
  EXPECT_THAT(Malformed(head + "| 0 | a | b |\n"), HasSubstr("expected two columns"));
  EXPECT_THAT(Malformed("1 GPU found.\n| CPU ID | x |\n"), HasSubstr("\"GPU ID\" column"));
  EXPECT_THAT(Malformed(head + Row("0", "Name: \x1b[1m")), HasSubstr("not printable text"));
  EXPECT_THAT(Malformed("99999 GPUs found.\n"), HasSubstr("more than 1024 GPUs"));
  EXPECT_THAT(Malformed(std::string(kMaxDiscoveryOutputBytes + 1, 'x')), HasSubstr("longer than"));
}

TEST(DiscoveryParserTest, RepeatedGpuIdsOrUuidsAreNotAListing) {
  // Either would map two of DCGM's GPUs onto one series, or one GPU's values onto two.
  const std::string head =
      "2 GPUs found.\n" + std::string(kRule) + std::string(kLabels) + std::string(kRule);
  EXPECT_THAT(
      Malformed(head + Row("0", "Device UUID: GPU-aaaa") + Row("0", "Device UUID: GPU-bbbb")),
      HasSubstr("GPU ID 0 is listed twice"));
  EXPECT_THAT(
      Malformed(head + Row("0", "Device UUID: GPU-aaaa") + Row("1", "Device UUID: GPU-AAAA")),
      HasSubstr("listed twice"));
  EXPECT_EQ(
      ParseOk(head + Row("0", "Device UUID: GPU-aaaa") + Row("1", "Device UUID: GPU-bbbb")).size(),
      2u);
}

}  // namespace
}  // namespace discovery_parser_test
}  // namespace expanse::dcgm
