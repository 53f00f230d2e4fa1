#include "spool/spool_names.h"

#include <gtest/gtest.h>

namespace expanse::spool {
namespace {

TEST(SpoolNamesTest, SpoolFileNamesSortBySequenceAndParseBack) {
  EXPECT_EQ(SpoolFileName(42, "boot-a"), "00000000000000000042-boot-a.spool");
  EXPECT_LT(SpoolFileName(9, "b"), SpoolFileName(10, "b"));
  const auto parts = ParseSpoolFileName(SpoolFileName(UINT64_MAX, "0f1e-77"));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->sequence, UINT64_MAX);
  EXPECT_EQ(parts->boot_id, "0f1e-77");
}

TEST(SpoolNamesTest, ParseRefusesAnythingElse) {
  for (const char* name : {"", "x.spool", "0000000000000000042-b.spool",
                           "00000000000000000042-b.spoo", "00000000000000000042_b.spool",
                           "00000000000000000042-.spool", "00000000000000000042-b/c.spool",
                           "99999999999999999999-b.spool", "0000000000000000004x-b.spool"}) {
    EXPECT_FALSE(ParseSpoolFileName(name).has_value()) << name;
  }
}

TEST(SpoolNamesTest, ClassifiesHostEntries) {
  EXPECT_EQ(ClassifyHostEntry(SpoolFileName(1, "b")), EntryKind::kSpoolFile);
  EXPECT_EQ(ClassifyHostEntry(TempFileName(SpoolFileName(1, "b"))), EntryKind::kTempFile);
  EXPECT_EQ(ClassifyHostEntry("health.rec"), EntryKind::kHealthFile);
  EXPECT_EQ(ClassifyHostEntry("notes.txt"), EntryKind::kUnexpected);
}

TEST(SpoolNamesTest, ValidatesHostsBootIdsAndKinds) {
  EXPECT_TRUE(IsValidHostName("gpu-node01.cluster"));
  EXPECT_FALSE(IsValidHostName(".quarantine"));
  EXPECT_FALSE(IsValidHostName(".."));
  EXPECT_FALSE(IsValidHostName("a/b"));
  EXPECT_FALSE(IsValidHostName(std::string(65, 'a')));
  EXPECT_TRUE(IsValidBootId("0f1e2d3c-aaaa-bbbb-cccc-0123456789ab"));
  EXPECT_FALSE(IsValidBootId("a.b"));
  EXPECT_TRUE(IsValidKind("gpu_series"));
  EXPECT_FALSE(IsValidKind("GPU"));
  EXPECT_FALSE(IsValidKind(""));
}

TEST(SpoolNamesTest, QuarantineNamesAreSanitizedAndBounded) {
  EXPECT_EQ(QuarantineEntryName("node01", "bad name\n", "bad_magic"), "node01-bad_name_-bad_magic");
  EXPECT_EQ(QuarantineEntryName("..", "x", "symlink"), "_.-x-symlink");
  EXPECT_LE(QuarantineEntryName(std::string(64, 'h'), std::string(255, 'n'), "too_large").size(),
            200u);
}

}  // namespace
}  // namespace expanse::spool
