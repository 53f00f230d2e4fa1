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
  std::vector<std::string> corrupt_names;
  for (const std::string& name : names) {
    if (name.ends_with(".tmp")) {
      ::unlink((dir + "/" + name).c_str());  // a cursor write cut short (WriteCursorLocked)
    } else if (std::optional<uint64_t> first = ParseSegmentFileName(name)) {
      segment_names.push_back(*first);
    } else if (name.ends_with(kCorruptSuffix)) {
      corrupt_names.push_back(name);
    }
  }
  std::sort(segment_names.begin(), segment_names.end());
  // A kept damaged tail goes with its segment; one left by a crash in between goes now.
  for (const std::string& name : corrupt_names) {
    const std::string segment =
        name.substr(0, name.size() - std::string_view(kCorruptSuffix).size());
    if (!ParseSegmentFileName(segment) ||
        !std::binary_search(segment_names.begin(), segment_names.end(),
                            *ParseSegmentFileName(segment))) {
      ::unlink((dir + "/" + name).c_str());
    }
  }

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
  // Rewritten only when it lags, and a failure (a full disk) does not stop the daemon: what
  // the cursor would say follows from the files, except once the newest segment is gone.
  const bool unchanged =
      cursor && cursor->acked_through == acked_through_ && cursor->next_sequence == next_sequence_;
  const bool cursor_holds = unchanged || WriteCursorLocked().ok();
  return DeleteDoneSegmentsLocked(done, cursor_holds);
}

namespace {

// What replay finds at one offset of a segment.
struct FrameAt {
  enum Kind {
    kSound,
    kTorn,       // ends past the end of the file: a write cut short
    kBadLength,  // an impossible length: where the next frame starts is unknown
    kDamaged,  // a plausible length, but a CRC mismatch, an unparsable body or a misplaced sequence
  };
  Kind kind = kTorn;
  uint64_t size = 0;  // the whole frame; for kSound and kDamaged
  Record record{};    // kSound only
};

// Reads and checks the frame at `offset` of a segment of `file_size` bytes; a sound frame's
// sequence is at least `min_sequence` (sequences only grow, and a segment holds none below the
// one it is named after).
Result<FrameAt> ReadFrameAt(int fd, const std::string& path, uint64_t offset, uint64_t file_size,
                            uint64_t min_sequence) {
  if (file_size - offset < kFrameHeaderSize)
    return FrameAt{.kind = FrameAt::kTorn};
  std::string frame;
  EXPANSE_RETURN_IF_ERROR(ReadAt(fd, offset, kFrameHeaderSize, path, &frame));
  const uint64_t body = FrameBodyLength(frame);
  if (body < kMinRecordBodySize || body > kMaxRecordBodySize)
    return FrameAt{.kind = FrameAt::kBadLength};
  if (file_size - offset - kFrameHeaderSize < body)
    return FrameAt{.kind = FrameAt::kTorn};
  EXPANSE_RETURN_IF_ERROR(ReadAt(fd, offset, kFrameHeaderSize + body, path, &frame));
  FrameAt at{.kind = FrameAt::kDamaged, .size = kFrameHeaderSize + body};
  size_t frame_size = 0;
  if (CheckFrame(frame, &frame_size) != FrameCheck::kOk || frame_size != at.size)
    return at;
  Result<Record> record = DecodeFrame(frame);
  if (!record.ok() || record->sequence < min_sequence)
    return at;
  at.kind = FrameAt::kSound;
  at.record = *std::move(record);
  return at;
}

}  // namespace

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
  const char* problem = nullptr;
  while (offset < size) {
    const uint64_t min_sequence = std::max(*max_sequence + 1, first_sequence);
    EXPANSE_ASSIGN_OR_RETURN(FrameAt frame, ReadFrameAt(fd, path, offset, size, min_sequence));
    if (frame.kind == FrameAt::kDamaged) {
      // Its length is plausible, and a sound frame right after it confirms it (a chance match
      // of a CRC and the sequence order is negligible): only this record is lost, as when Peek
      // finds one damaged. The file keeps it, and the next Open skips it again.
      EXPANSE_ASSIGN_OR_RETURN(FrameAt next,
                               ReadFrameAt(fd, path, offset + frame.size, size, min_sequence));
      if (next.kind == FrameAt::kSound) {
        Log("outbox: " + path + ": skipped a damaged record of " + std::to_string(frame.size) +
            " bytes at offset " + std::to_string(offset) + " (damaged on disk; it is lost)");
        ++counters_.corrupt_entries;
        counters_.corrupt_bytes += frame.size;
        offset += frame.size;
        continue;
      }
    }
    if (frame.kind != FrameAt::kSound) {
      problem = frame.kind == FrameAt::kTorn ? "torn" : "corrupt";
      break;
    }
    const uint64_t sequence = frame.record.sequence;
    *max_sequence = sequence;
    segment.last_sequence = sequence;
    if (sequence > acked_through_) {
      entries_.push_back({.sequence = sequence,
                          .segment = first_sequence,
                          .offset = offset,
                          .frame_bytes = frame.size});
      depth_bytes_ += frame.size;
    }
    offset += frame.size;
  }
  if (problem != nullptr) {
    const bool torn = std::string_view(problem) == "torn";
    Log("outbox: " + path + ": cut " + std::to_string(size - offset) + " bytes of " + problem +
        " tail at offset " + std::to_string(offset) +
        (torn ? " (a write interrupted by a crash)"
              : " (damaged on disk; entries in it are lost; its bytes are copied to " + path +
                    kCorruptSuffix + ")"));
    counters_.corrupt_bytes += size - offset;
    if (!torn) {
      ++counters_.corrupt_entries;
      KeepCorruptTail(fd, path, offset, size);
    }
    if (::ftruncate(fd, static_cast<off_t>(offset)) != 0)
      return IoError("truncate", path);
    EXPANSE_RETURN_IF_ERROR(SyncFile(fd, path));
    segment.bytes = offset;
  }
  segments_[first_sequence] = segment;
  disk_bytes_ += segment.bytes;
  return OkStatus();
}

void Outbox::KeepCorruptTail(int fd, const std::string& path, uint64_t offset, uint64_t size) {
  // For an operator who wants to look at the damage or rescue what is in it: at most one file
  // per segment (a later cut replaces it), no larger than the cut or one largest frame,
  // deleted with its segment. Not synced: it is evidence, not queue data. On a full disk it is
  // simply not there.
  std::string tail;
  const std::string corrupt_path = path + kCorruptSuffix;
  const uint64_t keep = std::min<uint64_t>(size - offset, kFrameHeaderSize + kMaxRecordBodySize);
  Status status = ReadAt(fd, offset, keep, path, &tail);
  if (status.ok()) {
    const fs::UniqueFd out(
        ::open(corrupt_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out.valid() || !fs::WriteFully(out.get(), tail))
      status = IoError("write", corrupt_path);
  }
  if (!status.ok()) {
    (void)::unlink(corrupt_path.c_str());
    Log("outbox: could not keep the cut tail in " + corrupt_path + ": " + status.ToString());
  }
}

Status Outbox::WriteCursorLocked() {
  const std::string& dir = options_.directory;
  const std::string bytes =
      EncodeCursor({.acked_through = acked_through_, .next_sequence = next_sequence_});
  const std::string temp_name = std::string(kCursorFile) + ".tmp";
  Status status = OkStatus();
  const fs::UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) {
    status = IoError("open directory", dir);
  } else if (WriteRefused(temp_name, bytes.size())) {
    status = IoError("create", dir + "/" + temp_name);
  } else {
    // Through "ack.tmp", which Load() removes when a crash left it (docs/formats/outbox.md).
    status = ToOutboxError(
        fs::WriteFileAtomicallyAt(dir_fd.get(), dir, kCursorFile, temp_name, bytes, 0600));
  }
  // A full disk has no block for ack.tmp, but the old cursor's block takes the new 28 bytes.
  if (!status.ok() && OverwriteCursorLocked(bytes).ok())
    status = OkStatus();
  if (status.ok()) {
    cursor_stale_ = false;
    return status;
  }
  ++counters_.cursor_failures;
  if (!cursor_stale_) {
    // Once per streak: a full disk fails every acknowledgement until space comes back.
    Log("outbox: cannot record acknowledgements in " + dir + "/" + kCursorFile + " (" +
        status.ToString() +
        "); acknowledged entries still on disk would be sent again after a restart");
  }
  cursor_stale_ = true;
  return status;
}

Status Outbox::OverwriteCursorLocked(const std::string& bytes) {
  // In place, so not atomic: but 28 bytes at offset 0 lie in one sector, and a torn write
  // fails the CRC and reads as a damaged cursor at Open, which resends and re-seeds from the
  // clock rather than losing or reusing anything.
  const std::string path = options_.directory + "/" + kCursorFile;
  const fs::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid())
    return IoError("open", path);
  if (WriteRefused(kCursorFile, 0))
    return IoError("write", path);
  const ssize_t written = ::pwrite(fd.get(), bytes.data(), bytes.size(), 0);
  if (written != static_cast<ssize_t>(bytes.size())) {
    if (written >= 0)
      errno = ENOSPC;  // a short write: only space runs out between sector and file
    return IoError("write", path);
  }
  // A damaged cursor of another size would still read as damaged; shrinking needs no space.
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes.size())) != 0)
    return IoError("truncate", path);
  return SyncFile(fd.get(), path);
}

bool Outbox::WriteRefused(std::string_view name, uint64_t new_bytes) const {
  if (!options_.write_error)
    return false;
  const int error = options_.write_error(name, new_bytes);
  if (error == 0)
    return false;
  errno = error;
  return true;
}

}  // namespace expanse::outbox
