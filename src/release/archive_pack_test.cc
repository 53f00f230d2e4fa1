// Packing: deterministic bytes, a release.json that matches, entries GNU tar reads as we
// describe them, and refusals of bad input.
#include "release/archive_pack.h"

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/subprocess.h"
#include "release/archive_extract.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace archive_pack_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(staging() + "/bin/expanse-daemon",
                       "\x7f"
                       "ELF daemon",
                       0700);
    testing::WriteFile(staging() + "/bin/py-spy",
                       "\x7f"
                       "ELF py-spy",
                       0755);
    testing::WriteFile(staging() + "/share/LICENSE", "license text\n", 0600);
    std::filesystem::create_directories(out());
  }

  std::string staging() const { return dir_ / "staging"; }
  std::string out() const { return dir_ / "out"; }

  PackOptions Options() {
    PackOptions options{.name = "expanse-daemon", .version = "1.2.0", .output_dir = out()};
    auto files = FilesUnder(staging());
    EXPECT_TRUE(files.ok()) << files.status();
    options.files = *files;
    return options;
  }

  std::string Tar(std::vector<std::string> args) {
    args.insert(args.begin(), "tar");
    SubprocessOptions options;
    options.argv = args;
    options.env = std::vector<std::string>{"TZ=UTC", "LC_ALL=C"};
    Result<SubprocessResult> ran = RunSubprocess(options);
    EXPECT_TRUE(ran.ok() && ran->Succeeded()) << (ran.ok() ? ran->stderr_text : "");
    return ran.ok() ? ran->stdout_text : "";
  }

  testing::TempDir dir_;
};

TEST_F(PackTest, WritesANamedArchiveThatExtractsAndMatchesItsReleaseJson) {
  Result<std::string> path = PackArchive(Options());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, out() + "/expanse-daemon_1.2.0_linux_amd64.tar.gz");
  EXPECT_EQ(testing::ModeOf(*path), 0644u);
  Result<ExtractedRelease> extracted = ExtractArchive(*path, dir_ / "x");
  ASSERT_TRUE(extracted.ok()) << extracted.status();
  const ReleaseInfo& info = extracted->info;
  EXPECT_EQ(info.name, "expanse-daemon");
  EXPECT_EQ(info.version, "1.2.0");
  ASSERT_EQ(info.files.size(), 3u);
  EXPECT_EQ(info.files[0].path, "bin/expanse-daemon");
  EXPECT_EQ(info.files[0].mode, kExecutableMode);  // from 0700
  EXPECT_EQ(info.files[0].sha256, crypto::Sha256Hex("\x7f"
                                                    "ELF daemon"));
  EXPECT_EQ(info.files[2].path, "share/LICENSE");
  EXPECT_EQ(info.files[2].mode, kRegularMode);  // from 0600
}

TEST_F(PackTest, GnuTarSeesSortedEntriesWithFixedOwnersModesAndTimes) {
  std::string path = PackArchive(Options()).value();
  std::string listing = Tar({"--numeric-owner", "-tvzf", path});
  EXPECT_EQ(listing, "-rw-r--r-- 0/0             " +
                         std::to_string(RenderReleaseInfo(InspectArchive(path).value()).size()) +
                         " 1970-01-01 00:00 release.json\n"
                         "-rwxr-xr-x 0/0              11 1970-01-01 00:00 bin/expanse-daemon\n"
                         "-rwxr-xr-x 0/0              11 1970-01-01 00:00 bin/py-spy\n"
                         "-rw-r--r-- 0/0              13 1970-01-01 00:00 share/LICENSE\n");
}

TEST_F(PackTest, SameInputsGiveTheSameBytes) {
  std::string first = testing::ReadFile(PackArchive(Options()).value());
  std::filesystem::remove_all(out());
  std::filesystem::create_directories(out());
  // Newer mtimes on the sources must not matter.
  std::filesystem::last_write_time(staging() + "/bin/py-spy",
                                   std::filesystem::file_time_type::clock::now());
  std::string second = testing::ReadFile(PackArchive(Options()).value());
  EXPECT_EQ(first, second);
  // gzip header: magic, deflate, no flags, MTIME (bytes 4-7) zero.
  ASSERT_GT(first.size(), 10u);
  EXPECT_EQ(first.substr(0, 4), std::string("\x1f\x8b\x08\x00", 4));
  EXPECT_EQ(first.substr(4, 4), std::string(4, '\0'));
}

TEST_F(PackTest, CuptiArchivesCarryVariantAndMinimumDriver) {
  PackOptions options = Options();
  options.name = "expanse-cupti";
  options.variant = "cuda1300";
  options.min_driver = "580.65.06";
  std::string path = PackArchive(options).value();
  EXPECT_EQ(path, out() + "/expanse-cupti_1.2.0_cuda1300_linux_amd64.tar.gz");
  ReleaseInfo info = InspectArchive(path).value();
  EXPECT_EQ(info.variant, "cuda1300");
  EXPECT_EQ(info.min_driver, "580.65.06");
}

TEST_F(PackTest, RefusesBadInput) {
  PackOptions options = Options();
  options.version = "1.2";
  options.variant = "cuda1300";  // without min_driver
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("min_driver"));

  options = Options();
  options.version = "v1";
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("version \"v1\""));

  options = Options();
  options.files.push_back({staging() + "/share/LICENSE", "../LICENSE"});
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("\"../LICENSE\""));

  options = Options();
  options.files.push_back({staging() + "/share/LICENSE", "share/LICENSE"});
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("given twice"));

  options = Options();
  options.files.push_back({staging() + "/share/LICENSE", "release.json"});
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("release.json"));

  options = Options();
  options.files = {{staging() + "/bin", "bin"}};
  EXPECT_THAT(PackArchive(options).status().message(), HasSubstr("not a regular file"));

  options = Options();
  ASSERT_TRUE(PackArchive(options).ok());
  EXPECT_EQ(PackArchive(options).status().code(), StatusCode::kAlreadyExists);
  // Nothing but the one archive was left in the output directory.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out()), {}), 1);
}

TEST_F(PackTest, StagingDirectoriesHoldOnlyRegularFiles) {
  Result<std::vector<PackFile>> files = FilesUnder(staging());
  ASSERT_TRUE(files.ok());
  std::vector<std::string> paths;
  for (const PackFile& f : *files)
    paths.push_back(f.archive_path);
  EXPECT_THAT(paths, ElementsAre("bin/expanse-daemon", "bin/py-spy", "share/LICENSE"));

  std::filesystem::create_symlink("/etc/passwd", staging() + "/bin/link");
  EXPECT_THAT(FilesUnder(staging()).status().message(), HasSubstr("a symbolic link"));
  EXPECT_FALSE(FilesUnder(dir_ / "missing").ok());
}

// The operator guide's v1.8.0 failure ("unsupported type 49"): a packer that kept a staging
// tree's hard links wrote tar type '1' entries, which the extractor refuses. Each of two names
// for one file is packed as a regular file of its own, and the archive unpacks.
TEST_F(PackTest, HardLinkedFilesArePackedAsRegularFiles) {
  std::filesystem::create_hard_link(staging() + "/bin/py-spy", staging() + "/bin/py-spy-again");
  ASSERT_EQ(std::filesystem::hard_link_count(staging() + "/bin/py-spy"), 2u);
  Result<std::string> path = PackArchive(Options());
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string listing = Tar({"-tvzf", *path});
  EXPECT_THAT(listing, HasSubstr("bin/py-spy-again"));
  EXPECT_THAT(listing, Not(HasSubstr(" link to "))) << listing;
  Result<ExtractedRelease> extracted = ExtractArchive(*path, dir_ / "x");
  ASSERT_TRUE(extracted.ok()) << extracted.status();
  EXPECT_EQ(testing::ReadFile(extracted->dir + "/bin/py-spy-again"),
            testing::ReadFile(staging() + "/bin/py-spy"));
}

}  // namespace
}  // namespace archive_pack_test
}  // namespace expanse::release
