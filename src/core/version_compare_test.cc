#include "core/version_compare.h"

#include <gtest/gtest.h>

namespace expanse {
namespace {

TEST(CompareVersionsTest, NumbersCompareNumerically) {
  EXPECT_GT(CompareVersions("1.10.0", "1.9.2"), 0);
  EXPECT_LT(CompareVersions("1.9.2", "1.10.0"), 0);
  EXPECT_GT(CompareVersions("2.0.0", "1.99.99"), 0);
  EXPECT_EQ(CompareVersions("1.2.0", "1.2.0"), 0);
  EXPECT_EQ(CompareVersions("1.2", "1.2.0"), 0);
  EXPECT_LT(CompareVersions("1.2", "1.2.1"), 0);
  EXPECT_EQ(CompareVersions("01.2.0", "1.2.0"), 0);
}

TEST(CompareVersionsTest, PreReleasesComeBeforeTheRelease) {
  EXPECT_LT(CompareVersions("1.2.0-rc.1", "1.2.0"), 0);
  EXPECT_GT(CompareVersions("1.2.0", "1.2.0-rc.1"), 0);
  EXPECT_GT(CompareVersions("1.2.0-rc.1", "1.1.9"), 0);
  EXPECT_LT(CompareVersions("1.2.0-rc.9", "1.2.0-rc.10"), 0);  // numeric identifiers
  EXPECT_LT(CompareVersions("1.2.0-alpha", "1.2.0-beta"), 0);
  EXPECT_LT(CompareVersions("1.2.0-1", "1.2.0-alpha"), 0);  // numeric before alphanumeric
  EXPECT_LT(CompareVersions("1.2.0-rc", "1.2.0-rc.1"), 0);  // a prefix is older
  EXPECT_EQ(CompareVersions("1.2.0-rc.01", "1.2.0-rc.1"), 0);
}

TEST(CompareVersionsTest, ValidityRules) {
  for (const char* good : {"1", "1.2", "1.2.3", "1.2.3.4", "1.2.0-rc.1", "0.1.0-dev-3"})
    EXPECT_TRUE(IsValidVersion(good)) << good;
  for (const char* bad : {"", "v1.2", "1..2", "1.2.", ".1", "1.2.3.4.5", "1.2-", "1.2-rc..1",
                          "1.2-r c", "1234567890.0", "1.2 ", "1.2.0+build"})
    EXPECT_FALSE(IsValidVersion(bad)) << bad;
  EXPECT_FALSE(IsValidVersion(std::string(65, '1')));
}

TEST(CompareVersionsTest, InvalidVersionsSortFirstAndConsistently) {
  EXPECT_LT(CompareVersions("garbage", "0.0.1"), 0);
  EXPECT_GT(CompareVersions("0.0.1", "garbage"), 0);
  EXPECT_LT(CompareVersions("a", "b"), 0);
  EXPECT_EQ(CompareVersions("x", "x"), 0);
}

TEST(CompareDriverVersionsTest, NvidiaStyleVersions) {
  EXPECT_GT(CompareDriverVersions("580.159.04", "580.65.06"), 0);
  EXPECT_LT(CompareDriverVersions("575.57.08", "580.65.06"), 0);
  EXPECT_EQ(CompareDriverVersions("580.65.06", "580.65.6"), 0);
  EXPECT_GT(CompareDriverVersions("580.65.06", "580.65"), 0);
  EXPECT_TRUE(IsValidDriverVersion("535.104.05"));
  EXPECT_TRUE(IsValidDriverVersion("550.54"));
  for (const char* bad : {"", "580", "580.65.06-1", "r580", "580.65.06.1.2", "N/A"})
    EXPECT_FALSE(IsValidDriverVersion(bad)) << bad;
  EXPECT_LT(CompareDriverVersions("N/A", "1.0"), 0);
}

TEST(CanonicalVersionTest, DropsTheLeadingVAndBuildMetadataOnly) {
  EXPECT_EQ(CanonicalVersion("1.8.0"), "1.8.0");
  EXPECT_EQ(CanonicalVersion("v1.8.0"), "1.8.0");
  EXPECT_EQ(CanonicalVersion("v1.8.0-rc.1"), "1.8.0-rc.1");
  EXPECT_EQ(CanonicalVersion("1.8.0+git.abc-1"), "1.8.0");
  EXPECT_EQ(CanonicalVersion("v1.8.0-rc.1+20261202"), "1.8.0-rc.1");
  for (const char* bad : {"", "v", "vv1.8.0", "V1.8.0", "1.8.0+", "1.8.0+a..b", "1.8.0+a_b",
                          "1.8.0 ", "latest", "1.x.0", "+1.8.0"}) {
    EXPECT_EQ(CanonicalVersion(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace expanse
