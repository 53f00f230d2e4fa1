// Internal to the release module: one pass over a release archive that enforces every rule
// of docs/formats/release-archive.md on each entry header before its data is touched, hashes
// every file, and optionally hands entries to a sink that writes them. Extraction runs it
// twice (check everything, then write); inspection runs it once without a sink.

#ifndef EXPANSE_RELEASE_ARCHIVE_SCAN_H_
#define EXPANSE_RELEASE_ARCHIVE_SCAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "release/archive_extract.h"
#include "release/release_info.h"

namespace expanse::release_internal {

// Receives the entries that passed the checks, parents before children.
class ScanSink {
 public:
  virtual ~ScanSink() = default;
  virtual Status MakeDirectory(const std::string& path) = 0;
  // A regular file of `mode` (kExecutableMode or kRegularMode); its bytes follow in Write
  // calls, then EndFile.
  virtual Status BeginFile(const std::string& path, uint32_t mode) = 0;
  virtual Status Write(std::string_view bytes) = 0;
  virtual Status EndFile() = 0;
};

struct ArchiveScan {
  std::vector<release::ReleaseFile> files;  // sorted by path; release.json excluded
  std::string release_json;                 // its bytes; empty when the archive has none
  bool has_release_json = false;
};

// Reads the gzip-compressed tar on `fd` from its current offset. Refusals (none writes
// anything the sink has not already been given):
//   kInvalidArgument "archive_unsafe_entry": absolute or ".." paths, links, devices, FIFOs,
//     sparse files, setuid/setgid/sticky bits, duplicate or conflicting paths;
//   kResourceExhausted "archive_too_large": a limit of `limits` exceeded;
//   kDataLoss "archive_corrupt": not gzip, not tar, truncated or damaged.
Result<ArchiveScan> ScanArchive(int fd, const release::ExtractLimits& limits, ScanSink* sink);

// Parses the scan's release.json and checks it lists exactly the files scanned, with their
// sizes, hashes and modes. kDataLoss "release_json_mismatch" naming the first difference;
// kInvalidArgument "release_json_invalid" when it is missing or does not parse.
Result<release::ReleaseInfo> CheckAgainstReleaseInfo(const ArchiveScan& scan);

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_ARCHIVE_SCAN_H_
