#include "pystack/text_format.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace expanse::pystack {
namespace text_format_test {
namespace {

TEST(TextFormatTest, FillsPlaceholdersInOrder) {
  EXPECT_EQ(Format("pid {} runs {}", 42, std::string("3.11.2")), "pid 42 runs 3.11.2");
  EXPECT_EQ(Format("at {:#x}", std::uint64_t{0x7f00}), "at 0x7f00");
  EXPECT_EQ(Format("/proc/1/map_files/{:x}-{:x}", 0x400000, std::uint64_t{0x41f000}),
            "/proc/1/map_files/400000-41f000");
  EXPECT_EQ(Format("byte {}", std::uint8_t{7}), "byte 7");
  EXPECT_EQ(Format("no placeholders"), "no placeholders");
  EXPECT_EQ(Format("{} and {}", 1), "1 and {}");
  EXPECT_EQ(Format("{}", 1, 2), "1");
}

}  // namespace
}  // namespace text_format_test
}  // namespace expanse::pystack
