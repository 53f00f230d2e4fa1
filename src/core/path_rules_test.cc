#include "core/path_rules.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse {
namespace {

using ::testing::HasSubstr;

std::string Problem(std::string_view path) {
  Status s = CheckAbsolutePath("--prefix", path);
  if (s.ok())
    return "<ok>";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "invalid_path");
  return s.message();
}

TEST(CheckAbsolutePathTest, AcceptsOrdinaryAbsolutePaths) {
  for (const char* path : {"/", "/srv/expanse", "/srv/expanse/", "/a//b", "/srv/.hidden/x",
                           "/srv/x..y", "/data/Überblick"}) {
    EXPECT_EQ(Problem(path), "<ok>") << path;
  }
}

TEST(CheckAbsolutePathTest, NamesTheFieldAndWhatIsWrong) {
  EXPECT_EQ(Problem(""), "--prefix is empty: expected an absolute path");
  EXPECT_EQ(Problem("srv/x"), R"(--prefix "srv/x" is not an absolute path)");
  EXPECT_EQ(Problem("/srv/./x"), R"(--prefix "/srv/./x" contains a '.' component)");
  EXPECT_EQ(Problem("/srv/.."), R"(--prefix "/srv/.." contains a '..' component)");
  EXPECT_THAT(Problem("/srv/\x7f"), HasSubstr("contains a control character"));
  EXPECT_THAT(Problem(std::string("/srv\0x", 6)), HasSubstr("contains a control character"));
  EXPECT_EQ(Problem(std::string("/srv/\xc3", 6)), R"(--prefix "/srv/\xC3" is not valid UTF-8)");
}

TEST(CheckAbsolutePathTest, RefusesPathsLongerThanPathMax) {
  const std::string longest = "/" + std::string(4094, 'a');
  EXPECT_EQ(Problem(longest), "<ok>");
  EXPECT_EQ(Problem(longest + "a"), "--prefix is 4096 bytes; the limit is 4095");
}

}  // namespace
}  // namespace expanse
