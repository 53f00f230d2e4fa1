#include "release/release_info.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::release {
namespace release_info_test {
namespace {

using ::testing::HasSubstr;

constexpr char kSha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

ReleaseInfo Cupti() {
  return ReleaseInfo{.name = "expanse-cupti",
                     .version = "1.2.0",
                     .os = "linux",
                     .arch = "amd64",
                     .variant = "cuda1300",
                     .min_driver = "580.65.06",
                     .files = {{"bin/expanse-cupti-helper", kSha, 0, kExecutableMode},
                               {"lib/cupti/libcupti.so.13", kSha, 0, kRegularMode}}};
}

TEST(ReleaseInfoTest, RenderParseRoundTrip) {
  std::string text = RenderReleaseInfo(Cupti());
  EXPECT_THAT(text, HasSubstr("\"format\": 1"));
  EXPECT_THAT(text, HasSubstr("\"mode\": \"0755\""));
  Result<ReleaseInfo> parsed = ParseReleaseInfo(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Cupti());
  ReleaseInfo daemon = Cupti();
  daemon.name = "expanse-daemon";
  daemon.variant.clear();
  daemon.min_driver.clear();
  EXPECT_THAT(RenderReleaseInfo(daemon), ::testing::Not(HasSubstr("variant")));
  EXPECT_EQ(ParseReleaseInfo(RenderReleaseInfo(daemon)).value(), daemon);
}

TEST(ReleaseInfoTest, FileNames) {
  EXPECT_EQ(ArchiveFileName(Cupti()), "expanse-cupti_1.2.0_cuda1300_linux_amd64.tar.gz");
  ReleaseInfo daemon{.name = "expanse-daemon", .version = "1.2.0-rc.1", .arch = "arm64"};
  EXPECT_EQ(ArchiveFileName(daemon), "expanse-daemon_1.2.0-rc.1_linux_arm64.tar.gz");
}

TEST(ReleaseInfoTest, RefusesBadDocumentsNamingTheField) {
  auto message = [](const std::string& text) { return ParseReleaseInfo(text).status().message(); };
  EXPECT_THAT(message("not json"), HasSubstr("not valid JSON"));
  EXPECT_THAT(message("[]"), HasSubstr("release.json: the document must be an object"));
  Status format = ParseReleaseInfo(R"({"format":2})").status();
  EXPECT_EQ(format.reason(), "unsupported_format");
  EXPECT_THAT(format.message(), HasSubstr("format is 2; this build reads format 1"));
  std::string good = RenderReleaseInfo(Cupti());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return message(text);
  };
  EXPECT_THAT(replaced("\"mode\": \"0755\"", "\"mode\": \"4755\""), HasSubstr("files[0].mode"));
  EXPECT_THAT(replaced("\"size\": 0", "\"size\": -1"), HasSubstr("files[0].size"));
  EXPECT_THAT(replaced("bin/expanse-cupti-helper", "../x"), HasSubstr("files[0].path"));
  EXPECT_THAT(replaced("bin/expanse-cupti-helper", "release.json"),
              HasSubstr("does not list itself"));
  EXPECT_THAT(replaced("bin/expanse-cupti-helper", "z"), HasSubstr("out of order"));
  EXPECT_THAT(replaced(kSha, "E3B0"), HasSubstr("files[0].sha256"));
  EXPECT_THAT(replaced("\"min_driver\": \"580.65.06\",", ""), HasSubstr("go together"));
  EXPECT_THAT(replaced("\"name\": \"expanse-cupti\",", ""),
              HasSubstr("release.json: name is required"));
  EXPECT_THAT(replaced("\"arch\": \"amd64\"", "\"arch\": 64"), HasSubstr("arch must be a string"));
}

TEST(ReleaseInfoTest, ArchivePathRules) {
  for (const char* good : {"bin/expanse-daemon", "lib/cupti/libcupti.so.2025.1.0", "a", "x/y_z+1"})
    EXPECT_TRUE(IsValidArchivePath(good)) << good;
  for (const char* bad : {"", "/abs", "a//b", "a/", "./a", "a/./b", "a/../b", "..", "a b", "a\\b",
                          "caf\xc3\xa9", "tab\there"})
    EXPECT_FALSE(IsValidArchivePath(bad)) << bad;
  EXPECT_FALSE(IsValidArchivePath(std::string(256, 'a')));
}

}  // namespace
}  // namespace release_info_test
}  // namespace expanse::release
