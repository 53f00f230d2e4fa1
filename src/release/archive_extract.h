// Reading release archives: full inspection without writing anything, and safe extraction
// into a fresh directory. Every entry is treated as hostile. Rules and reasons:
// docs/formats/release-archive.md.

#ifndef EXPANSE_RELEASE_ARCHIVE_EXTRACT_H_
#define EXPANSE_RELEASE_ARCHIVE_EXTRACT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"
#include "release/release_info.h"

namespace expanse::release {

struct ExtractLimits {
  uint64_t max_file_bytes = uint64_t{1} << 30;   // one file (a CUPTI library is ~100 MiB)
  uint64_t max_total_bytes = uint64_t{2} << 30;  // all files together
  size_t max_entries = 4096;                     // files and directories
};

struct ExtractedRelease {
  std::string dir{};   // the directory created by ExtractArchive
  ReleaseInfo info{};  // its release.json, checked against the files
};

// Reads the whole archive and checks it as ExtractArchive would, writing nothing: every entry
// header, every file's size, hash and mode against release.json, and that release.json lists
// exactly the files present. Returns the release.json.
Result<ReleaseInfo> InspectArchive(const std::string& archive_path,
                                   const ExtractLimits& limits = {});

// Extracts into `dest_dir`, which must not exist (its parent must): it is created, filled, and
// left with mode 0755 only when everything checked out. The archive is read twice: first
// every entry is checked and hashed with nothing written (so a hostile entry anywhere means
// nothing is written at all), then the files are written with descriptor-relative, no-follow,
// exclusive creation and modes 0755/0644, hashed again and compared with the first pass. On
// any failure `dest_dir` is removed entirely.
// Errors: kAlreadyExists when dest_dir exists; the refusals of InspectArchive (reasons
// archive_unsafe_entry, archive_too_large, archive_corrupt, release_json_invalid,
// release_json_mismatch); errno-based codes for file system failures.
Result<ExtractedRelease> ExtractArchive(const std::string& archive_path,
                                        const std::string& dest_dir,
                                        const ExtractLimits& limits = {});

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_ARCHIVE_EXTRACT_H_
