#include "pystack/proc_maps.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::pystack {
namespace proc_maps_test {
namespace {

TEST(ProcMapsTest, ParsesFileAnonymousAndSpecialMappings) {
  const std::string text =
      "00400000-0041f000 r--p 00000000 08:01 1183390                            "
      "/usr/bin/python3.11\n"
      "7f3a1c000000-7f3a1c021000 rw-p 00000000 00:00 0 \n"
      "7ffd5c3e1000-7ffd5c402000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f3a1d000000-7f3a1d100000 r-xp 000f5000 fd:02 42   /opt/my env/lib/libpython3.12.so.1.0 "
      "(deleted)\n";
  const Result<std::vector<MemoryMapping>> maps = ParseProcMaps(text, 100);
  ASSERT_TRUE(maps.ok()) << maps.status();
  ASSERT_EQ(maps->size(), 4u);
  EXPECT_EQ((*maps)[0].start, 0x400000u);
  EXPECT_EQ((*maps)[0].end, 0x41f000u);
  EXPECT_EQ((*maps)[0].permissions, "r--p");
  EXPECT_EQ((*maps)[0].inode, 1183390u);
  EXPECT_EQ((*maps)[0].path, "/usr/bin/python3.11");
  EXPECT_FALSE((*maps)[0].deleted);
  EXPECT_EQ((*maps)[1].path, "");
  EXPECT_EQ((*maps)[1].inode, 0u);
  EXPECT_EQ((*maps)[2].path, "[stack]");
  EXPECT_EQ((*maps)[3].file_offset, 0xf5000u);
  EXPECT_EQ((*maps)[0].device_major, 8u);
  EXPECT_EQ((*maps)[0].device_minor, 1u);
  EXPECT_EQ((*maps)[3].device_major, 0xfdu);  // hexadecimal, as the kernel prints them
  EXPECT_EQ((*maps)[3].device_minor, 2u);
  EXPECT_EQ((*maps)[3].path, "/opt/my env/lib/libpython3.12.so.1.0");
  EXPECT_TRUE((*maps)[3].deleted);
}

TEST(ProcMapsTest, RefusesMalformedLinesNamingTheLine) {
  for (const std::string bad :
       {"zz-10 r--p 0 08:01 1 /x", "10-1 r--p 0 08:01 1 /x", "10-20 r--p 0 08:01",
        "10-20 rp 0 0:0 1", "10-20 r--p 0x 08:01 1 /x", "10-20 r--p 0 0801 1 /x"}) {
    const Result<std::vector<MemoryMapping>> maps = ParseProcMaps("\n" + bad + "\n", 100);
    ASSERT_FALSE(maps.ok()) << bad;
    EXPECT_EQ(maps.status().reason(), "proc_maps_malformed");
    EXPECT_NE(maps.status().message().find("line 2"), std::string::npos) << maps.status();
  }
}

TEST(ProcMapsTest, BoundsTheNumberOfMappings) {
  std::string text;
  for (int i = 0; i < 11; ++i) {
    text += "10-20 r--p 0 00:00 0\n";
  }
  EXPECT_TRUE(ParseProcMaps(text, 11).ok());
  const Result<std::vector<MemoryMapping>> maps = ParseProcMaps(text, 10);
  ASSERT_FALSE(maps.ok());
  EXPECT_EQ(maps.status().reason(), "proc_maps_too_large");
}

TEST(ProcStatTest, ReadsStateAndStartTimePastAnAwkwardCommandName) {
  const Result<ProcStat> stat = ParseProcStat(
      "4242 (py) (S x) R 1 4242 4242 0 -1 4194560 1187 0 0 0 12 3 0 0 20 0 3 0 987654 "
      "27369472 2303 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0\n");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'R');
  EXPECT_EQ(stat->start_time, 987654u);
}

TEST(ProcStatTest, RefusesTruncatedOrGarbledLines) {
  for (const std::string bad : {"", "12 (x", "12 (x) S 1 2 3",
                                "12 (x) SS 1 2 3 4 5 6 7 8 9 10 11 "
                                "12 13 14 15 16 17 18 19",
                                "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 abc 1",
                                "12 (x) \xca 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 1"}) {
    const Result<ProcStat> stat = ParseProcStat(bad);
    ASSERT_FALSE(stat.ok()) << bad;
    EXPECT_EQ(stat.status().reason(), "proc_stat_malformed");
  }
}

}  // namespace
}  // namespace proc_maps_test
}  // namespace expanse::pystack
