// Test-only helpers of the release tests: a temporary directory, whole-file I/O, and a raw
// tar writer (libarchive) for hand-made archives, hostile ones included.
#ifndef EXPANSE_RELEASE_RELEASE_TEST_UTIL_H_
#define EXPANSE_RELEASE_RELEASE_TEST_UTIL_H_

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "crypto/hash.h"
#include "release/release_info.h"

namespace expanse::release::testing {

using TempDir = ::expanse::testing::TempDir;

inline void WriteFile(const std::string& path, const std::string& contents, mode_t mode = 0644) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  ::chmod(path.c_str(), mode);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// One tar entry exactly as written, whatever the release rules say.
struct RawEntry {
  std::string path;
  std::string data{};
  mode_t type = AE_IFREG;
  mode_t perm = 0644;
  std::string symlink{};   // with type AE_IFLNK
  std::string hardlink{};  // makes the entry a hard link
};

inline RawEntry File(std::string path, std::string data, mode_t perm = 0644) {
  return RawEntry{.path = std::move(path), .data = std::move(data), .perm = perm};
}

// The release.json that matches `files` (sha256, size, 0755/0644 by execute bits).
inline RawEntry ReleaseJsonFor(const std::vector<RawEntry>& files, ReleaseInfo info = {}) {
  if (info.name.empty()) {
    info.name = "expanse-daemon";
    info.version = "1.2.0";
  }
  for (const RawEntry& file : files) {
    info.files.push_back(ReleaseFile{file.path, crypto::Sha256Hex(file.data), file.data.size(),
                                     (file.perm & 0111) != 0 ? kExecutableMode : kRegularMode});
  }
  std::sort(info.files.begin(), info.files.end(),
            [](const ReleaseFile& a, const ReleaseFile& b) { return a.path < b.path; });
  return File(kReleaseInfoName, RenderReleaseInfo(info));
}

// Writes a tar of `entries` in the given order; gzip-compressed unless `gzip` is false.
inline void WriteRawArchive(const std::string& path, const std::vector<RawEntry>& entries,
                            bool gzip = true) {
  struct archive* a = archive_write_new();
  if (gzip)
    archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const RawEntry& e : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, e.perm);
    if (!e.symlink.empty())
      archive_entry_set_symlink(entry, e.symlink.c_str());
    if (!e.hardlink.empty())
      archive_entry_set_hardlink(entry, e.hardlink.c_str());
    archive_entry_set_size(entry, e.type == AE_IFREG && e.hardlink.empty()
                                      ? static_cast<la_int64_t>(e.data.size())
                                      : 0);
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
    if (!e.data.empty() && e.hardlink.empty())
      archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

}  // namespace expanse::release::testing

#endif  // EXPANSE_RELEASE_RELEASE_TEST_UTIL_H_
