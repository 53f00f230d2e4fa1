// Safe extraction against hand-made hostile archives: each refusal names the entry, and nothing
// is left behind, inside or outside the destination.
#include "release/archive_extract.h"

#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/subprocess.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace archive_extract_test {
namespace {

using testing::File;
using ::testing::HasSubstr;
using testing::RawEntry;
using testing::ReleaseJsonFor;
using testing::WriteRawArchive;

constexpr char kDaemon[] =
    "\x7f"
    "ELF daemon bytes";

class ExtractTest : public ::testing::Test {
 protected:
  std::string Archive(const std::vector<RawEntry>& entries, bool gzip = true) {
    std::string path = dir_ / ("a" + std::to_string(++count_) + ".tar.gz");
    WriteRawArchive(path, entries, gzip);
    return path;
  }

  // A valid archive: release.json first, then the files.
  std::string ValidArchive(const std::vector<RawEntry>& files) {
    std::vector<RawEntry> entries = {ReleaseJsonFor(files)};
    entries.insert(entries.end(), files.begin(), files.end());
    return Archive(entries);
  }

  // Extracts, expects a refusal with `reason`, checks nothing was left, returns the message.
  std::string Refused(const std::string& archive, const std::string& reason,
                      const ExtractLimits& limits = {}) {
    Result<ExtractedRelease> result = ExtractArchive(archive, dest(), limits);
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(result.status().reason(), reason) << result.status();
    EXPECT_FALSE(std::filesystem::exists(dest())) << "destination left behind";
    EXPECT_FALSE(std::filesystem::exists(dir_ / "escaped")) << "wrote outside the destination";
    return result.status().message();
  }

  std::string dest() const { return dir_ / "out"; }

  testing::TempDir dir_;
  int count_ = 0;
  std::vector<RawEntry> files_ = {File("bin/expanse-daemon", kDaemon, 0755),
                                  File("share/README", "readme\n")};
};

TEST_F(ExtractTest, ExtractsAValidArchiveWithExactModes) {
  Result<ExtractedRelease> result = ExtractArchive(ValidArchive(files_), dest());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->dir, dest());
  EXPECT_EQ(result->info.name, "expanse-daemon");
  ASSERT_EQ(result->info.files.size(), 2u);
  EXPECT_EQ(testing::ReadFile(dest() + "/bin/expanse-daemon"), kDaemon);
  EXPECT_EQ(testing::ModeOf(dest() + "/bin/expanse-daemon"), 0755u);
  EXPECT_EQ(testing::ModeOf(dest() + "/share/README"), 0644u);
  EXPECT_EQ(testing::ModeOf(dest() + "/release.json"), 0644u);
  EXPECT_EQ(testing::ModeOf(dest() + "/bin"), 0755u);
  EXPECT_EQ(testing::ModeOf(dest()), 0755u);
}

TEST_F(ExtractTest, ModesAreMaskedTo0755Or0644) {
  std::vector<RawEntry> files = {File("bin/tool", "x", 0777), File("data", "y", 0666),
                                 File("private", "z", 0600)};
  Result<ExtractedRelease> result = ExtractArchive(ValidArchive(files), dest());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(testing::ModeOf(dest() + "/bin/tool"), 0755u);
  EXPECT_EQ(testing::ModeOf(dest() + "/data"), 0644u);
  EXPECT_EQ(testing::ModeOf(dest() + "/private"), 0644u);
}

TEST_F(ExtractTest, ArchivesMadeByGnuTarWithDotSlashAndDirectoriesAreRead) {
  std::string staging = dir_ / "staging";
  testing::WriteFile(staging + "/bin/expanse-daemon", kDaemon, 0755);
  testing::WriteFile(staging + "/share/README", "readme\n", 0644);
  testing::WriteFile(staging + "/release.json", ReleaseJsonFor(files_).data);
  std::string archive = dir_ / "gnu.tar.gz";
  SubprocessOptions tar;
  tar.argv = {"tar", "-C", staging, "-czf", archive, "."};
  Result<SubprocessResult> ran = RunSubprocess(tar);
  ASSERT_TRUE(ran.ok() && ran->Succeeded()) << (ran.ok() ? ran->stderr_text : "");
  Result<ExtractedRelease> result = ExtractArchive(archive, dest());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(testing::ReadFile(dest() + "/share/README"), "readme\n");
}

TEST_F(ExtractTest, RefusesDotDot) {
  std::vector<RawEntry> files = {File("../escaped", "x")};
  std::string message = Refused(ValidArchive(files), "archive_unsafe_entry");
  EXPECT_THAT(message, HasSubstr("\"../escaped\""));
  EXPECT_THAT(message, HasSubstr("'..'"));
  Refused(Archive({File("bin/../../escaped", "x")}), "archive_unsafe_entry");
}

TEST_F(ExtractTest, RefusesAbsolutePaths) {
  std::string outside = dir_ / "escaped";
  std::string message = Refused(Archive({File(outside, "x")}), "archive_unsafe_entry");
  EXPECT_THAT(message, HasSubstr("absolute path"));
}

TEST_F(ExtractTest, RefusesSymlinkPointingOut) {
  RawEntry link{
      .path = "bin/expanse-daemon", .type = AE_IFLNK, .perm = 0777, .symlink = "/etc/passwd"};
  std::string message = Refused(Archive({ReleaseJsonFor(files_), link}), "archive_unsafe_entry");
  EXPECT_EQ(message,
            "entry \"bin/expanse-daemon\" is a symbolic link (tar type '2', unsupported type 50) "
            "to \"/etc/passwd\"; "
            "release archives contain only regular files and directories");
}

TEST_F(ExtractTest, RefusesHardLinks) {
  RawEntry link{.path = "lib/cupti/versions.tsv", .hardlink = "share/README"};
  std::vector<RawEntry> entries = {ReleaseJsonFor(files_), files_[0], files_[1], link};
  std::string message = Refused(Archive(entries), "archive_unsafe_entry");
  EXPECT_EQ(message,
            "entry \"lib/cupti/versions.tsv\" is a hard link (tar type '1', unsupported type 49) "
            "to \"share/README\"; "
            "release archives contain only regular files and directories");
}

TEST_F(ExtractTest, RefusesDevicesAndFifos) {
  EXPECT_THAT(Refused(Archive({RawEntry{.path = "dev", .type = AE_IFCHR}}), "archive_unsafe_entry"),
              HasSubstr("character device (tar type '3', unsupported type 51)"));
  EXPECT_THAT(Refused(Archive({RawEntry{.path = "blk", .type = AE_IFBLK}}), "archive_unsafe_entry"),
              HasSubstr("block device (tar type '4', unsupported type 52)"));
  EXPECT_THAT(
      Refused(Archive({RawEntry{.path = "pipe", .type = AE_IFIFO}}), "archive_unsafe_entry"),
      HasSubstr("FIFO (tar type '6', unsupported type 54)"));
}

TEST_F(ExtractTest, RefusesSetuidSetgidAndSticky) {
  for (mode_t perm : {04755, 02755, 01755}) {
    std::vector<RawEntry> files = {File("bin/expanse-daemon", kDaemon, perm)};
    EXPECT_THAT(Refused(ValidArchive(files), "archive_unsafe_entry"),
                HasSubstr("setuid, setgid or sticky"))
        << std::oct << perm;
  }
  RawEntry dir{.path = "bin/", .type = AE_IFDIR, .perm = 01777};
  Refused(Archive({dir}), "archive_unsafe_entry");
}

TEST_F(ExtractTest, RefusesDuplicateAndConflictingPaths) {
  std::vector<RawEntry> dup = {ReleaseJsonFor(files_), files_[0], files_[1], files_[1]};
  EXPECT_THAT(Refused(Archive(dup), "archive_unsafe_entry"), HasSubstr("appears twice"));
  std::vector<RawEntry> file_then_child = {File("bin", "x"), File("bin/tool", "y")};
  EXPECT_THAT(Refused(Archive(file_then_child), "archive_unsafe_entry"),
              HasSubstr("which is a file"));
  std::vector<RawEntry> child_then_file = {File("bin/tool", "y"), File("bin", "x")};
  EXPECT_THAT(Refused(Archive(child_then_file), "archive_unsafe_entry"),
              HasSubstr("both a file and a directory"));
}

TEST_F(ExtractTest, NothingIsWrittenWhenALaterEntryIsHostile) {
  std::vector<RawEntry> entries = {ReleaseJsonFor(files_), files_[0], files_[1],
                                   RawEntry{.path = "zz", .type = AE_IFLNK, .symlink = "/"}};
  Refused(Archive(entries), "archive_unsafe_entry");
  // Proof that the refusal came before any write: under a parent that does not exist, creating
  // the destination would fail with kNotFound, which is what a valid archive gets.
  std::string unreachable = dir_ / "no-such-parent/out";
  EXPECT_EQ(ExtractArchive(Archive(entries), unreachable).status().reason(),
            "archive_unsafe_entry");
  EXPECT_EQ(ExtractArchive(ValidArchive(files_), unreachable).status().code(),
            StatusCode::kNotFound);
}

TEST_F(ExtractTest, RefusesOversizedFilesTotalsAndEntryCounts) {
  std::string archive = ValidArchive(files_);
  EXPECT_THAT(Refused(archive, "archive_too_large", {.max_file_bytes = 10}),
              HasSubstr("the limit for one file is 10"));
  EXPECT_THAT(Refused(archive, "archive_too_large", {.max_total_bytes = 20}),
              HasSubstr("add up to more than 20 bytes"));
  EXPECT_THAT(Refused(archive, "archive_too_large", {.max_entries = 2}),
              HasSubstr("more than 2 entries"));
  EXPECT_TRUE(ExtractArchive(archive, dest(), {.max_entries = 3}).ok());
}

TEST_F(ExtractTest, RefusesBadGzipTruncationAndPlainTar) {
  std::string garbage = dir_ / "garbage.tar.gz";
  testing::WriteFile(garbage, "this is not gzip at all");
  Refused(garbage, "archive_corrupt");

  std::string good = testing::ReadFile(ValidArchive(files_));
  std::string truncated = dir_ / "truncated.tar.gz";
  testing::WriteFile(truncated, good.substr(0, good.size() / 2));
  Refused(truncated, "archive_corrupt");

  std::string corrupted = dir_ / "corrupted.tar.gz";
  std::string bytes = good;
  for (size_t i = 20; i < bytes.size() - 8; i += 7)
    bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
  testing::WriteFile(corrupted, bytes);
  Refused(corrupted, "archive_corrupt");

  std::vector<RawEntry> entries = {ReleaseJsonFor(files_), files_[0], files_[1]};
  EXPECT_THAT(Refused(Archive(entries, /*gzip=*/false), "archive_corrupt"),
              HasSubstr("not gzip-compressed"));
}

TEST_F(ExtractTest, RefusesReleaseJsonMismatches) {
  std::vector<RawEntry> listed = files_;
  std::vector<RawEntry> present = files_;

  present[1].data = "tampered\n";  // same path, other bytes
  std::vector<RawEntry> entries = {ReleaseJsonFor(listed), present[0], present[1]};
  EXPECT_THAT(Refused(Archive(entries), "release_json_mismatch"), HasSubstr("\"share/README\""));

  present = files_;
  present[0].perm = 0644;  // lost its execute bit
  entries = {ReleaseJsonFor(listed), present[0], present[1]};
  EXPECT_THAT(Refused(Archive(entries), "release_json_mismatch"), HasSubstr("mode 0644"));

  entries = {ReleaseJsonFor(listed), files_[0]};  // a listed file is missing
  EXPECT_THAT(Refused(Archive(entries), "release_json_mismatch"),
              HasSubstr("which the archive does not contain"));

  entries = {ReleaseJsonFor(listed), files_[0], files_[1], File("extra", "x")};
  EXPECT_THAT(Refused(Archive(entries), "release_json_mismatch"),
              HasSubstr("does not list \"extra\""));

  EXPECT_THAT(Refused(Archive({files_[0], files_[1]}), "release_json_invalid"),
              HasSubstr("no release.json"));
  entries = {File("release.json", "{\"format\":2}"), files_[0]};
  EXPECT_THAT(Refused(Archive(entries), "release_json_invalid"), HasSubstr("format is 2"));
}

TEST_F(ExtractTest, DestinationMustBeFresh) {
  std::string archive = ValidArchive(files_);
  std::filesystem::create_directory(dest());
  Result<ExtractedRelease> exists = ExtractArchive(archive, dest());
  EXPECT_EQ(exists.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::exists(dest()));  // not ours: left alone
  std::filesystem::remove(dest());

  std::filesystem::create_directory(dir_ / "elsewhere");
  std::filesystem::create_directory_symlink(dir_ / "elsewhere", dest());
  EXPECT_EQ(ExtractArchive(archive, dest()).status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "elsewhere"));
}

TEST_F(ExtractTest, InspectChecksWithoutWriting) {
  Result<ReleaseInfo> info = InspectArchive(ValidArchive(files_));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->files[0].path, "bin/expanse-daemon");
  EXPECT_EQ(info->files[0].mode, kExecutableMode);
  RawEntry link{.path = "x", .type = AE_IFLNK, .symlink = "y"};
  EXPECT_EQ(InspectArchive(Archive({link})).status().reason(), "archive_unsafe_entry");
  EXPECT_EQ(InspectArchive(dir_ / "missing.tar.gz").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace archive_extract_test
}  // namespace expanse::release
