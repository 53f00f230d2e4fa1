#include "telemetry/proc_thread_files.h"

#include <gtest/gtest.h>

namespace expanse::telemetry {
namespace {

TEST(ProcThreadFilesTest, TheStateIsAfterTheLastParenWhateverTheThreadCalledItself) {
  EXPECT_EQ(ParseThreadState("100 (python3) S 1 100 100 0 -1 4194560\n"), 'S');
  EXPECT_EQ(ParseThreadState("101 (pt_data_worker) D 100 100 100 0 -1\n"), 'D');
  EXPECT_EQ(ParseThreadState("102 (evil) D (x) S 100 100\n"), 'S');  // ") D (" in its name
  EXPECT_EQ(ParseThreadState("103 (a b)) R 1\n"), 'R');
  // No state to be found: nothing read, no ")", nothing after it, no space after it.
  EXPECT_EQ(ParseThreadState(""), 0);
  EXPECT_EQ(ParseThreadState("104 (python3 S 1\n"), 0);
  EXPECT_EQ(ParseThreadState("105 (python3)"), 0);
  EXPECT_EQ(ParseThreadState("105 (python3) "), 0);
  EXPECT_EQ(ParseThreadState("106 (python3)S 1"), 0);
}

TEST(ProcThreadFilesTest, RunQueueWaitIsTheSecondOfThreeUnsignedFields) {
  EXPECT_EQ(ParseRunQueueWaitNs("5000000000 1000000000 10\n"), 1000000000u);
  EXPECT_EQ(ParseRunQueueWaitNs("1 0 1"), 0u);
  EXPECT_EQ(ParseRunQueueWaitNs("1 18446744073709551615\n"), UINT64_MAX);
  EXPECT_EQ(ParseRunQueueWaitNs("1 7"), 7u);  // an older kernel's two fields
  for (const char* bad : {"", "\n", "1", "1 ", "1\n2 3", " 1 2 3", "1  2 3", "1 -2 3", "1 +2 3",
                          "-1 2 3", "1 18446744073709551616 3", "1 2x 3", "1 0x10 3", "x 2 3"}) {
    EXPECT_EQ(ParseRunQueueWaitNs(bad), std::nullopt) << '"' << bad << '"';
  }
}

}  // namespace
}  // namespace expanse::telemetry
