// Outbox::Open: taking the directory, reading the cursor and replaying the segments.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/file_util.h"
#include "core/quote.h"
#include "outbox/file_io.h"
#include "outbox/outbox.h"
#include "outbox/outbox_format.h"

namespace expanse::outbox {
namespace {

constexpr char kCursorFile[] = "ack";
constexpr char kLockFile[] = "lock";

}  // namespace

Outbox::Outbox(OutboxOptions options, Clock& clock) : options_(std::move(options)), clock_(clock) {}

Outbox::~Outbox() {
  CloseActiveLocked();
  if (lock_fd_ >= 0)
    ::close(lock_fd_);  // releases the flock
}

Result<std::unique_ptr<Outbox>> Outbox::Open(OutboxOptions options, Clock& clock) {
  if (options.directory.empty())
    return InvalidArgumentError("outbox: no directory given");
  if (options.max_bytes < (uint64_t{64} << 10) || options.segment_bytes == 0) {
    return InvalidArgumentError(
        "outbox: max_bytes must be at least 64 KiB and segment_bytes "
        "positive");
  }
  std::unique_ptr<Outbox> outbox(new Outbox(std::move(options), clock));
  EXPANSE_RETURN_IF_ERROR(outbox->Load());
  return outbox;
}

std::string Outbox::SegmentPath(uint64_t first_sequence) const {
  return options_.directory + "/" + SegmentFileName(first_sequence);
}

void Outbox::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

Status Outbox::Load() {
  const std::string& dir = options_.directory;
  std::error_code error;
  if (std::filesystem::create_directories(dir, error)) {
    ::chmod(dir.c_str(), 0700);  // entries are the site's telemetry
  } else if (error) {
    return UnavailableError("outbox: cannot create " + dir + ": " + error.message())
        .WithReason("outbox_io");
  }
  if (!options_.allow_network_filesystem) {
    EXPANSE_ASSIGN_OR_RETURN(std::string fs, NetworkFilesystemName(dir));
    if (!fs.empty()) {
      return FailedPreconditionError("outbox: " + dir + " is on a network file system (" + fs +
                                     "); the upload queue must be on the controller's local "
                                     "disk, e.g. /var/lib/expanse/outbox")
          .WithReason("outbox_on_network_filesystem");
    }
  }
  const std::string lock_path = dir + "/" + kLockFile;
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0)
    return IoError("open", lock_path);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return FailedPreconditionError("outbox: " + dir +
                                     " is in use by another process (is a second controller "
                                     "daemon running?)")
          .WithReason("outbox_locked");
    }
    return IoError("lock", lock_path);
  }

  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names, ToOutboxError(fs::ListDirectory(dir)));
  std::vector<uint64_t> segment_names;
  for (const std::string& name : names) {
    if (name.ends_with(".tmp")) {
      ::unlink((dir + "/" + name).c_str());  // a cursor write cut short (WriteCursorLocked)
    } else if (std::optional<uint64_t> first = ParseSegmentFileName(name)) {
      segment_names.push_back(*first);
    }
  }
  std::sort(segment_names.begin(), segment_names.end());

  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> cursor_bytes,
      ToOutboxError(fs::ReadSmallFile(dir + "/" + kCursorFile, 4096, fs::Symlinks::kRefuse)));
  std::optional<Cursor> cursor;
  if (cursor_bytes) {
    cursor = DecodeCursor(*cursor_bytes);
    if (!cursor) {
      // Written atomically, so this is damage, not a torn write. Re-sending acknowledged
      // entries is harmless (the server deduplicates); reusing a sequence is not, so the
      // next sequence is re-seeded from the clock below.
      Log("outbox: " + dir + "/" + kCursorFile +
          " is damaged; unacknowledged and acknowledged entries still on disk will be sent "
          "(again)");
    }
  }
  acked_through_ = cursor ? cursor->acked_through : 0;

  uint64_t max_sequence = 0;
  for (size_t i = 0; i < segment_names.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        ReplaySegment(segment_names[i], i + 1 == segment_names.size(), &max_sequence));
  }
  next_sequence_ = std::max<uint64_t>(cursor ? cursor->next_sequence : 0, max_sequence + 1);
  if (!segment_names.empty())
    next_sequence_ = std::max(next_sequence_, segment_names.back());
  if (!cursor) {
    const int64_t now_ms = std::max<int64_t>(clock_.NowMs(), 1);
    next_sequence_ = std::max(next_sequence_, static_cast<uint64_t>(now_ms) * 1000);
  }
  acked_through_ = std::min(acked_through_, next_sequence_ - 1);

  // Segments whose entries were all acknowledged before the last exit.
  std::vector<uint64_t> done;
  for (const auto& [first, segment] : segments_) {
    if (entries_.empty() || segment.last_sequence < entries_.front().sequence)
      done.push_back(first);
  }
  EXPANSE_RETURN_IF_ERROR(WriteCursorLocked());
  for (uint64_t first : done)
    EXPANSE_RETURN_IF_ERROR(DeleteSegmentLocked(first));
  return OkStatus();
}

Status Outbox::ReplaySegment(uint64_t first_sequence, bool last, uint64_t* max_sequence) {
  const std::string path = SegmentPath(first_sequence);
  const fs::UniqueFd file(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!file.valid())
    return IoError("open", path);
  const int fd = file.get();
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    return IoError("stat", path);
  const auto size = static_cast<uint64_t>(info.st_size);

  std::string header;
  if (size < kSegmentHeaderSize || !ReadAt(fd, 0, kSegmentHeaderSize, path, &header).ok() ||
      header != std::string_view(kSegmentMagic, kSegmentHeaderSize)) {
    // A crash right after creating the file leaves it short; anything else is not ours.
    if (!(last && size < kSegmentHeaderSize)) {
      Log("outbox: " + path + " is not an outbox segment; removing its " + std::to_string(size) +
          " bytes");
    }
    counters_.corrupt_bytes += size;
    if (::unlink(path.c_str()) != 0)
      return IoError("remove", path);
    return OkStatus();
  }

  Segment segment{.first_sequence = first_sequence, .last_sequence = 0, .bytes = size};
  uint64_t offset = kSegmentHeaderSize;
  std::string frame;
  const char* problem = nullptr;
  while (offset < size) {
    if (size - offset < kFrameHeaderSize) {
      problem = "torn";
      break;
    }
    EXPANSE_RETURN_IF_ERROR(ReadAt(fd, offset, kFrameHeaderSize, path, &frame));
    const uint64_t body = FrameBodyLength(frame);
    if (body < kMinRecordBodySize || body > kMaxRecordBodySize) {
      problem = "corrupt";
      break;
    }
    if (size - offset - kFrameHeaderSize < body) {
      problem = "torn";
      break;
    }
    EXPANSE_RETURN_IF_ERROR(ReadAt(fd, offset, kFrameHeaderSize + body, path, &frame));
    size_t frame_size = 0;
    if (CheckFrame(frame, &frame_size) != FrameCheck::kOk) {
      problem = "corrupt";
      break;
    }
    Result<Record> record = DecodeFrame(frame);
    // Sequences only grow, and a segment holds none below the one it is named after.
    if (!record.ok() || record->sequence <= *max_sequence || record->sequence < first_sequence) {
      problem = "corrupt";
      break;
    }
    *max_sequence = record->sequence;
    segment.last_sequence = record->sequence;
    if (record->sequence > acked_through_) {
      entries_.push_back({.sequence = record->sequence,
                          .segment = first_sequence,
                          .offset = offset,
                          .frame_bytes = frame_size});
      depth_bytes_ += frame_size;
    }
    offset += frame_size;
  }
  if (problem != nullptr) {
    Log("outbox: " + path + ": cut " + std::to_string(size - offset) + " bytes of " + problem +
        " tail at offset " + std::to_string(offset) +
        (std::string_view(problem) == "torn" ? " (a write interrupted by a crash)"
                                             : " (damaged on disk; entries in it are lost)"));
    counters_.corrupt_bytes += size - offset;
    if (std::string_view(problem) == "corrupt")
      ++counters_.corrupt_entries;
    if (::ftruncate(fd, static_cast<off_t>(offset)) != 0)
      return IoError("truncate", path);
    EXPANSE_RETURN_IF_ERROR(SyncFile(fd, path));
    segment.bytes = offset;
  }
  segments_[first_sequence] = segment;
  disk_bytes_ += segment.bytes;
  return OkStatus();
}

Status Outbox::WriteCursorLocked() {
  const std::string& dir = options_.directory;
  const fs::UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid())
    return IoError("open directory", dir);
  // Through "ack.tmp", which Load() removes when a crash left it (docs/formats/outbox.md).
  return ToOutboxError(fs::WriteFileAtomicallyAt(
      dir_fd.get(), dir, kCursorFile, std::string(kCursorFile) + ".tmp",
      EncodeCursor({.acked_through = acked_through_, .next_sequence = next_sequence_}), 0600));
}

}  // namespace expanse::outbox
