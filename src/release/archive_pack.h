// Writing release archives: a deterministic gzip-compressed tar of the given files plus the
// release.json that describes them. Format: docs/formats/release-archive.md.

#ifndef EXPANSE_RELEASE_ARCHIVE_PACK_H_
#define EXPANSE_RELEASE_ARCHIVE_PACK_H_

#include <string>
#include <vector>

#include "core/result.h"

namespace expanse::release {

struct PackFile {
  std::string source_path{};   // a regular file on disk (symlinks to one are followed)
  std::string archive_path{};  // where it goes in the archive, e.g. "bin/expanse-daemon"
};

struct PackOptions {
  std::string name{};  // package, e.g. "expanse-daemon"
  std::string version{};
  std::string os = "linux";
  std::string arch = "amd64";
  std::string variant{};          // CUPTI builds: e.g. "cuda1300", with min_driver
  std::string min_driver{};       // e.g. "580.65.06"
  std::vector<PackFile> files{};  // at least one; any order
  std::string output_dir{};       // the archive is written here under ArchiveFileName()
};

// Writes the archive and returns its path. The same inputs give the same bytes: entries in a
// fixed order (release.json, then files by path), mtime 0, owner 0:0, modes 0755 for files
// with any execute bit and 0644 otherwise, no gzip timestamp. Errors: kInvalidArgument for
// bad names or paths (naming the field), duplicate archive paths, a source that is not a
// regular file; kAlreadyExists when the archive already exists (a published release is
// never rebuilt under the same name); kDataLoss when a source changed while being packed.
Result<std::string> PackArchive(const PackOptions& options);

// Every regular file below `staging_dir`, with its path relative to it, sorted. Symlinks,
// devices and other entries are refused (kInvalidArgument naming them), so what is packed
// is exactly what the directory holds.
Result<std::vector<PackFile>> FilesUnder(const std::string& staging_dir);

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_ARCHIVE_PACK_H_
