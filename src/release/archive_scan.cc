#include "release/archive_scan.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/quote.h"
#include "release/sha256_stream.h"

namespace expanse::release_internal {

using release::ExtractLimits;
using release::ReleaseFile;
using release::ReleaseInfo;

namespace {

struct ArchiveReadDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchiveReadPtr = std::unique_ptr<struct archive, ArchiveReadDeleter>;

constexpr size_t kReadChunkBytes = 64 << 10;

Status Unsafe(const std::string& message) {
  return InvalidArgumentError(message).WithReason("archive_unsafe_entry");
}

Status TooLarge(const std::string& message) {
  return ResourceExhaustedError(message).WithReason("archive_too_large");
}

// libarchive's message, made safe to print (it can quote bytes from the archive).
Status Corrupt(struct archive* a, std::string_view what) {
  const char* detail = a != nullptr ? archive_error_string(a) : nullptr;
  std::string message = "the archive is not a readable gzip-compressed tar (" + std::string(what);
  if (detail != nullptr)
    message += ": " + QuoteForMessage(detail, 200);
  return DataLossError(message + ")").WithReason("archive_corrupt");
}

std::string EntryName(std::string_view path) { return "entry " + QuoteForMessage(path, 200); }

// How an entry that is not a plain file or directory is named to the operator, with the tar
// type flag a packer would have written for it (ustar: 1 hard link, 2 symlink, 3 character
// device, 4 block device, 6 FIFO; sockets have none), also as the byte's number: other
// extractors say "unsupported type 49" for a hard link, and the install guide quotes that.
std::string DescribeSpecialEntry(struct archive_entry* entry) {
  if (archive_entry_hardlink(entry) != nullptr) {
    return "a hard link (tar type '1', unsupported type 49) to " +
           QuoteForMessage(archive_entry_hardlink(entry));
  }
  switch (archive_entry_filetype(entry)) {
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(entry);
      return "a symbolic link (tar type '2', unsupported type 50) to " +
             QuoteForMessage(target ? target : "");
    }
    case AE_IFCHR:
      return "a character device (tar type '3', unsupported type 51)";
    case AE_IFBLK:
      return "a block device (tar type '4', unsupported type 52)";
    case AE_IFIFO:
      return "a FIFO (tar type '6', unsupported type 54)";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "of an unknown type";
  }
}

bool HasDotDotComponent(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos)
      end = path.size();
    if (path.substr(start, end - start) == "..")
      return true;
    start = end + 1;
  }
  return false;
}

// The entry's path without leading "./" and, for directories, the trailing '/': "" for the
// archive's root itself. Refuses names that could land outside the destination.
Result<std::string> CheckedPath(struct archive_entry* entry, bool is_directory) {
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr || *raw == '\0') {
    return Unsafe("an entry has no usable name (empty, or not representable as text)");
  }
  std::string_view path(raw);
  if (path.front() == '/') {
    return Unsafe(EntryName(path) +
                  " has an absolute path; release archives hold only relative paths");
  }
  if (HasDotDotComponent(path)) {
    return Unsafe(EntryName(path) +
                  " contains a '..' component, which would leave the "
                  "destination directory");
  }
  std::string_view normalized = path;
  while (normalized.starts_with("./"))
    normalized.remove_prefix(2);
  if (is_directory) {
    while (normalized.ends_with('/'))
      normalized.remove_suffix(1);
    if (normalized.empty() || normalized == ".")
      return std::string();
  }
  if (!release::IsValidArchivePath(normalized)) {
    return Unsafe(EntryName(path) +
                  " has a path release archives do not use (empty, '.' or over-long components, "
                  "spaces, backslashes or non-ASCII bytes)");
  }
  return std::string(normalized);
}

// Tracks every path seen, so that no two entries name the same path and no file sits where
// another entry needs a directory.
class PathRegistry {
 public:
  Status Add(const std::string& path, bool is_directory) {
    if (!explicit_.insert(path).second)
      return Unsafe(EntryName(path) + " appears twice in the archive");
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      std::string parent = path.substr(0, slash);
      if (files_.contains(parent)) {
        return Unsafe(EntryName(path) + " lies under " + QuoteForMessage(parent) +
                      ", which is a file in the same archive");
      }
      directories_.insert(parent);
    }
    if (is_directory) {
      if (files_.contains(path))
        return Unsafe(EntryName(path) + " is both a file and a directory");
      directories_.insert(path);
    } else {
      if (directories_.contains(path))
        return Unsafe(EntryName(path) + " is both a file and a directory");
      files_.insert(path);
    }
    return OkStatus();
  }

 private:
  std::set<std::string> explicit_;
  std::set<std::string> directories_;
  std::set<std::string> files_;
};

class Scanner {
 public:
  Scanner(const ExtractLimits& limits, ScanSink* sink) : limits_(limits), sink_(sink) {}

  Result<ArchiveScan> Run(int fd) {
    archive_.reset(archive_read_new());
    if (archive_ == nullptr)
      return InternalError("libarchive could not allocate a reader");
    // Only gzip and tar: no other decompressor or format parser ever sees the bytes.
    if (archive_read_support_filter_gzip(archive_.get()) != ARCHIVE_OK ||
        archive_read_support_format_tar(archive_.get()) != ARCHIVE_OK) {
      return InternalError("libarchive lacks gzip or tar support");
    }
    if (archive_read_open_fd(archive_.get(), fd, kReadChunkBytes) != ARCHIVE_OK)
      return Corrupt(archive_.get(), "cannot open");
    while (true) {
      struct archive_entry* entry = nullptr;
      int rc = archive_read_next_header(archive_.get(), &entry);
      if (rc == ARCHIVE_EOF)
        break;
      // Warnings too: libarchive warns about malformed headers it then tries to make sense of.
      if (rc != ARCHIVE_OK)
        return Corrupt(archive_.get(), "bad entry header");
      if (!checked_compression_) {
        if (archive_filter_code(archive_.get(), 0) != ARCHIVE_FILTER_GZIP)
          return Corrupt(nullptr, "it is not gzip-compressed");
        checked_compression_ = true;
      }
      EXPANSE_RETURN_IF_ERROR(Entry(entry));
    }
    std::sort(scan_.files.begin(), scan_.files.end(),
              [](const ReleaseFile& a, const ReleaseFile& b) { return a.path < b.path; });
    return std::move(scan_);
  }

 private:
  Status Entry(struct archive_entry* entry) {
    if (++entries_ > limits_.max_entries) {
      return TooLarge("the archive has more than " + std::to_string(limits_.max_entries) +
                      " entries");
    }
    const bool is_directory =
        archive_entry_hardlink(entry) == nullptr && archive_entry_filetype(entry) == AE_IFDIR;
    const bool is_regular =
        archive_entry_hardlink(entry) == nullptr && archive_entry_filetype(entry) == AE_IFREG;
    EXPANSE_ASSIGN_OR_RETURN(std::string path, CheckedPath(entry, is_directory));
    if (!is_directory && !is_regular) {
      return Unsafe(EntryName(path) + " is " + DescribeSpecialEntry(entry) +
                    "; release archives contain only regular files and directories");
    }
    const mode_t mode = archive_entry_mode(entry);
    if ((mode & (S_ISUID | S_ISGID | S_ISVTX)) != 0) {
      char octal[16];
      std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode & 07777));
      return Unsafe(EntryName(path) + " has mode " + octal +
                    " with setuid, setgid or sticky bits; release files are 0755 or 0644");
    }
    if (path.empty())
      return OkStatus();  // the archive's root directory, "./"
    EXPANSE_RETURN_IF_ERROR(paths_.Add(path, is_directory));
    if (is_directory)
      return sink_ != nullptr ? sink_->MakeDirectory(path) : OkStatus();
    return File(entry, path, mode);
  }

  Status File(struct archive_entry* entry, const std::string& path, mode_t mode) {
    if (archive_entry_sparse_count(entry) > 0) {
      return Unsafe(EntryName(path) + " is a sparse file; release archives hold plain files");
    }
    const la_int64_t declared = archive_entry_size(entry);
    if (declared < 0)
      return Corrupt(nullptr, EntryName(path) + " has no size");
    const uint64_t size = static_cast<uint64_t>(declared);
    if (size > limits_.max_file_bytes) {
      return TooLarge(EntryName(path) + " is " + std::to_string(size) +
                      " bytes; the limit for one file is " +
                      std::to_string(limits_.max_file_bytes));
    }
    total_bytes_ += size;
    if (total_bytes_ > limits_.max_total_bytes) {
      return TooLarge("the archive's files add up to more than " +
                      std::to_string(limits_.max_total_bytes) + " bytes");
    }
    const bool is_release_json = path == release::kReleaseInfoName;
    if (is_release_json && size > release::kMaxReleaseInfoBytes) {
      return TooLarge("release.json is " + std::to_string(size) + " bytes; the limit is " +
                      std::to_string(release::kMaxReleaseInfoBytes));
    }
    // Only the executable bits survive: the rest of the mode is not the archive's to choose.
    const uint32_t masked = (mode & 0111) != 0 ? release::kExecutableMode : release::kRegularMode;
    if (sink_ != nullptr)
      EXPANSE_RETURN_IF_ERROR(sink_->BeginFile(path, masked));

    Sha256Stream hash;
    std::string buffer(kReadChunkBytes, '\0');
    uint64_t read_total = 0;
    while (true) {
      la_ssize_t n = archive_read_data(archive_.get(), buffer.data(), buffer.size());
      if (n < 0)
        return Corrupt(archive_.get(), "reading " + EntryName(path));
      if (n == 0)
        break;
      read_total += static_cast<uint64_t>(n);
      if (read_total > size)
        return Corrupt(nullptr, EntryName(path) + " holds more data than its header says");
      std::string_view chunk(buffer.data(), static_cast<size_t>(n));
      hash.Update(chunk);
      if (is_release_json)
        scan_.release_json.append(chunk);
      if (sink_ != nullptr)
        EXPANSE_RETURN_IF_ERROR(sink_->Write(chunk));
    }
    if (read_total != size)
      return Corrupt(nullptr, EntryName(path) + " is shorter than its header says");
    if (sink_ != nullptr)
      EXPANSE_RETURN_IF_ERROR(sink_->EndFile());
    if (is_release_json) {
      scan_.has_release_json = true;
    } else {
      scan_.files.push_back(ReleaseFile{path, hash.FinishHex(), size, masked});
    }
    return OkStatus();
  }

  const ExtractLimits& limits_;
  ScanSink* sink_;
  ArchiveReadPtr archive_;
  ArchiveScan scan_;
  PathRegistry paths_;
  size_t entries_ = 0;
  uint64_t total_bytes_ = 0;
  bool checked_compression_ = false;
};

Status Mismatch(const std::string& message) {
  return DataLossError("release.json does not match the archive: " + message)
      .WithReason("release_json_mismatch");
}

std::string ModeText(uint32_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", mode);
  return text;
}

}  // namespace

Result<ArchiveScan> ScanArchive(int fd, const ExtractLimits& limits, ScanSink* sink) {
  Scanner scanner(limits, sink);
  return scanner.Run(fd);
}

Result<ReleaseInfo> CheckAgainstReleaseInfo(const ArchiveScan& scan) {
  if (!scan.has_release_json) {
    return InvalidArgumentError("the archive has no release.json at its top level")
        .WithReason("release_json_invalid");
  }
  Result<ReleaseInfo> info = release::ParseReleaseInfo(scan.release_json);
  if (!info.ok()) {
    return InvalidArgumentError("the archive's release.json is invalid: " + info.status().message())
        .WithReason("release_json_invalid");
  }
  std::map<std::string_view, const ReleaseFile*> listed;
  for (const ReleaseFile& file : info->files)
    listed[file.path] = &file;
  for (const ReleaseFile& present : scan.files) {
    auto it = listed.find(present.path);
    if (it == listed.end())
      return Mismatch("it does not list " + QuoteForMessage(present.path, 200));
    const ReleaseFile& expected = *it->second;
    if (present.size != expected.size) {
      return Mismatch(QuoteForMessage(present.path, 200) + " is " + std::to_string(present.size) +
                      " bytes, release.json says " + std::to_string(expected.size));
    }
    if (present.sha256 != expected.sha256) {
      return Mismatch(QuoteForMessage(present.path, 200) + " has sha256 " + present.sha256 +
                      ", release.json says " + expected.sha256);
    }
    if (present.mode != expected.mode) {
      return Mismatch(QuoteForMessage(present.path, 200) + " has mode " + ModeText(present.mode) +
                      ", release.json says " + ModeText(expected.mode));
    }
    listed.erase(it);
  }
  if (!listed.empty()) {
    return Mismatch("it lists " + QuoteForMessage(listed.begin()->first, 200) +
                    ", which the archive does not contain");
  }
  return info;
}

}  // namespace expanse::release_internal
