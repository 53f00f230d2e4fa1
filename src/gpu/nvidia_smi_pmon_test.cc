#include "gpu/nvidia_smi_pmon.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/nvidia_smi_test_util.h"

namespace expanse::gpu {
namespace nvidia_smi_pmon_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

MATCHER_P4(IsRow, gpu, pid, sm, mem, "") {
  return arg.gpu_index == gpu && arg.pid == pid && arg.sm_util == sm && arg.mem_util == mem;
}

using Pct = std::optional<uint32_t>;

std::vector<PmonRow> ParseOk(std::string_view text) {
  Result<std::vector<PmonRow>> rows = ParsePmon(text);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *std::move(rows) : std::vector<PmonRow>{};
}

std::string ParseError(std::string_view text) {
  Result<std::vector<PmonRow>> rows = ParsePmon(text);
  if (rows.ok())
    return "<parsed>";
  EXPECT_EQ(rows.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rows.status().reason(), "nvidia_smi_output");
  return rows.status().message();
}

constexpr std::string_view kHeader =
    "# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command \n"
    "# Idx           #    C/G      %      %      %      %      %      %    name \n";

TEST(NvidiaSmiPmonTest, BusyFixture) {
  EXPECT_THAT(ParseOk(testing::FixtureOutput("nvsmi_pmon_busy.txt")),
              ElementsAre(IsRow(0u, 521u, Pct(98), Pct(23)), IsRow(0u, 521u, Pct(99), Pct(24))));
}

TEST(NvidiaSmiPmonTest, IdleGpuAndMissingSamples) {
  const std::string text =
      std::string(kHeader) +
      "    0          -     -      -      -      -      -      -      -    -              \n"
      "    1       4242     C      -      7      -      -      -      -    my job name   \n"
      "    2       4243     G      -      -      -      -      -      -    Xorg\n";
  EXPECT_THAT(ParseOk(text),
              ElementsAre(IsRow(1u, 4242u, Pct(), Pct(7)), IsRow(2u, 4243u, Pct(), Pct())));
}

TEST(NvidiaSmiPmonTest, ColumnsAreFoundByName) {
  // Other -s selections change which columns there are and where.
  EXPECT_THAT(ParseOk("# gpu pid type mem sm command\n 3 10 C 40 60 a\n"),
              ElementsAre(IsRow(3u, 10u, Pct(60), Pct(40))));
  EXPECT_THAT(ParseOk(""), IsEmpty());
  EXPECT_THAT(ParseOk(kHeader), IsEmpty());
}

TEST(NvidiaSmiPmonTest, Errors) {
  EXPECT_EQ(ParseError("    0        521     C     98     23\n"),
            "nvidia-smi pmon line 1: expected the \"# gpu pid ...\" header first, got \"0        "
            "521     C     98     23\"");
  EXPECT_EQ(ParseError("# gpu pid type fb command\n"),
            "nvidia-smi pmon line 1: the header has no column sm");
  EXPECT_EQ(ParseError(std::string(kHeader) + "    0        521     C     9x     23  -  -\n"),
            "nvidia-smi pmon line 3 column sm: expected a percentage or \"-\", got \"9x\"");
  EXPECT_EQ(ParseError(std::string(kHeader) + "    0        52.1     C     9     23  -  -\n"),
            "nvidia-smi pmon line 3 column pid: expected a whole number, got \"52.1\"");
  EXPECT_EQ(ParseError(std::string(kHeader) + "    0        521     C\n"),
            "nvidia-smi pmon line 3: expected 5 or more columns, got 3");
}

}  // namespace
}  // namespace nvidia_smi_pmon_test
}  // namespace expanse::gpu
