#include "core/version.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse {
namespace {

using ::testing::MatchesRegex;

TEST(VersionTest, ReleaseVersionIsMajorMinorPatch) {
  EXPECT_THAT(std::string(ReleaseVersion()), MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

TEST(VersionTest, GitRevisionIsHexOrUnknown) {
  EXPECT_THAT(std::string(GitRevision()), MatchesRegex("[0-9a-f]{12,}(-dirty)?|unknown"));
}

TEST(VersionTest, VersionStringCombinesBoth) {
  const std::string expected_suffix =
      GitRevision() == "unknown" ? " (unknown)" : " (git " + std::string(GitRevision()) + ")";
  EXPECT_EQ(VersionString(), std::string(ReleaseVersion()) + expected_suffix);
}

}  // namespace
}  // namespace expanse
