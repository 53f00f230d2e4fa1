#include "tsdb/wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/bytes.h"
#include "core/crc32.h"
#include "core/file_util.h"

namespace expanse::tsdb {

using bytes::ByteReader;
using bytes::PutU32;
namespace {

Status IoError(const std::string& what, const std::string& path) {
  const int err = errno;
  std::string message = "tsdb wal: " + what + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT)
    return ResourceExhaustedError(std::move(message));
  return UnavailableError(std::move(message)).WithReason("tsdb_io");
}

uint32_t FrameCrc(uint32_t length, std::string_view payload) {
  std::string length_bytes;
  PutU32(length_bytes, length);
  return Crc32(payload, Crc32(length_bytes));
}

// What the bytes at one offset of the file hold.
struct Frame {
  enum Kind {
    kRecord,     // an intact record
    kEnd,        // a zero header: padding, or a torn tail if anything but zeros follows
    kBadCrc,     // a whole frame (length within bounds and within the file) failing its CRC
    kMalformed,  // a short header, or a length past the limit or the end of the file
  } kind;
  uint32_t length = 0;
  std::string_view payload;
};

Frame ReadFrame(std::string_view contents, size_t at) {
  if (at > contents.size())
    return {Frame::kMalformed, 0, {}};
  ByteReader in(contents.substr(at));
  const uint32_t length = in.U32();
  const uint32_t crc = in.U32();
  if (!in.ok())
    return {Frame::kMalformed, 0, {}};
  if (length == 0 && crc == 0)
    return {Frame::kEnd, 0, {}};
  if (length > kMaxWalRecordBytes || length > in.remaining())
    return {Frame::kMalformed, length, {}};
  const std::string_view payload = in.Bytes(length);
  if (FrameCrc(length, payload) != crc)
    return {Frame::kBadCrc, length, payload};
  return {Frame::kRecord, length, payload};
}

// pwrite of all of `bytes` at `offset`, continuing after short writes and EINTR. Returns how
// many bytes reached the file; fewer than bytes.size() on failure, with errno set.
size_t PwriteFully(int fd, std::string_view bytes, uint64_t offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

// Whether a file without the magic is one whose creation a crash interrupted (empty, a part of
// the magic, or zeros the file system left), rather than a damaged or foreign log.
bool IsUnfinishedHeader(std::string_view contents) {
  const std::string_view magic(kWalMagic, sizeof kWalMagic);
  return contents.size() <= magic.size() &&
         (magic.starts_with(contents) ||
          contents.find_first_not_of('\0') == std::string_view::npos);
}

// An unused name beside `path` for a damaged log kept aside: wal.log.corrupt-1, -2, ... (a
// number, not a time: the WAL has no clock of its own, and the log line says when).
std::string CorruptName(const std::string& path) {
  struct stat st {};
  for (int i = 1;; ++i) {
    std::string name = path + ".corrupt-" + std::to_string(i);
    if (::lstat(name.c_str(), &st) != 0)
      return name;
  }
}

Status SyncDirectoryOf(const std::string& path) {
  if (Status synced = fs::SyncDirectory(fs::SplitPath(path).first); !synced.ok())
    return UnavailableError("tsdb wal: " + synced.message()).WithReason("tsdb_io");
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Wal>> Wal::Open(const std::string& path, const ReplayFn& replay,
                                       const LogFn& log) {
  constexpr int kFlags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(path.c_str(), kFlags | O_CREAT, 0600);
  if (fd < 0)
    return IoError("open", path);
  std::unique_ptr<Wal> wal(new Wal(path, fd, 0));
  std::string contents;
  if (!fs::ReadAll(fd, contents))
    return IoError("read", path);
  const std::string_view magic(kWalMagic, sizeof kWalMagic);
  if (!std::string_view(contents).starts_with(magic) && !IsUnfinishedHeader(contents)) {
    // Not a log this build can read (a flipped bit in the magic, a foreign file): its records
    // may be acknowledged batches, so it is kept for an operator rather than emptied.
    const std::string aside = CorruptName(path);
    if (::rename(path.c_str(), aside.c_str()) != 0)
      return IoError("rename aside", path);
    log("tsdb wal: ERROR: " + path + " does not start with the WAL magic; its " +
        std::to_string(contents.size()) + " bytes are kept as " + aside +
        " and a new, empty WAL is started. Batches acknowledged since the last flush may be "
        "only in that file");
    const int fresh = ::open(path.c_str(), kFlags | O_CREAT | O_EXCL, 0600);
    if (fresh < 0)
      return IoError("open", path);
    ::close(wal->fd_);
    wal->fd_ = fresh;
    fd = fresh;
    contents.clear();
  }
  const size_t file_size = contents.size();
  size_t good_end = 0;
  if (std::string_view(contents).starts_with(magic)) {
    good_end = magic.size();
    while (good_end < contents.size()) {
      const Frame frame = ReadFrame(contents, good_end);
      if (frame.kind == Frame::kEnd) {
        // No record is empty: this is the zero padding after the last record, the clean
        // end of the log unless a torn write left something further on.
        const std::string_view rest = std::string_view(contents).substr(good_end);
        if (rest.find_first_not_of('\0') == std::string_view::npos)
          contents.resize(good_end);
        break;
      }
      if (frame.kind == Frame::kBadCrc) {
        // A torn write is the last record; one followed by an intact record is damage in the
        // middle (a flipped bit), and the acknowledged records after it are kept.
        const size_t next = good_end + kWalRecordHeaderSize + frame.length;
        if (ReadFrame(contents, next).kind == Frame::kRecord) {
          log("tsdb wal: " + path + ": skipped a damaged record of " +
              std::to_string(frame.length) + " bytes at offset " + std::to_string(good_end) +
              " (checksum mismatch); its batch is lost unless its sender retries it");
          ++wal->skipped_records_;
          good_end = next;
          continue;
        }
      }
      if (frame.kind != Frame::kRecord)
        break;
      EXPANSE_RETURN_IF_ERROR(replay(frame.payload));
      good_end += kWalRecordHeaderSize + frame.length;
    }
  }
  const bool padded = good_end < file_size && good_end == contents.size();
  if (good_end < contents.size() && good_end > 0) {
    log("tsdb wal: " + path + ": cut " + std::to_string(contents.size() - good_end) +
        " bytes of torn or corrupt tail at offset " + std::to_string(good_end));
  }
  if (good_end == 0) {
    if (::ftruncate(fd, 0) != 0)
      return IoError("truncate", path);
    if (PwriteFully(fd, magic, 0) < magic.size())
      return IoError("write", path);
    good_end = magic.size();
  } else if ((good_end < contents.size() || padded) &&
             ::ftruncate(fd, static_cast<off_t>(good_end)) != 0) {
    return IoError("truncate", path);
  }
  if (::fdatasync(fd) != 0)
    return IoError("sync", path);
  // A new file's name (or a damaged one's new name) is durable only with its directory. At
  // every Open, not only the one that created the file: that one may have failed right here.
  EXPANSE_RETURN_IF_ERROR(SyncDirectoryOf(path));
  wal->size_ = good_end;
  wal->allocated_ = good_end;
  return wal;
}

Wal::~Wal() {
  // A cleanly closed log keeps no padding (best effort: replay skips it anyway).
  if (allocated_ > size_)
    (void)::ftruncate(fd_, static_cast<off_t>(size_));
  ::close(fd_);
}

void Wal::Preallocate(uint64_t end) {
  static const std::string zeros(1 << 20, '\0');
  const uint64_t target = end + kWalPreallocateBytes;
  uint64_t at = allocated_;
  while (at < target) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), target - at));
    const ssize_t written = ::pwrite(fd_, zeros.data(), n, static_cast<off_t>(at));
    if (written <= 0) {
      if (written < 0 && errno == EINTR)
        continue;
      // Out of space, say: appends then simply grow the file.
      (void)::ftruncate(fd_, static_cast<off_t>(allocated_));
      return;
    }
    at += static_cast<uint64_t>(written);
  }
  // Commits the new size now, once, rather than in the next append's sync.
  if (::fdatasync(fd_) == 0)
    allocated_ = target;
}

Status Wal::Append(std::string_view payload) {
  EXPANSE_RETURN_IF_ERROR(Write(payload));
  return Sync();
}

Status Wal::Write(std::string_view payload) {
  if (payload.size() > kMaxWalRecordBytes) {
    return InvalidArgumentError("tsdb wal: record of " + std::to_string(payload.size()) +
                                " bytes exceeds the " + std::to_string(kMaxWalRecordBytes) +
                                "-byte limit; send smaller batches")
        .WithReason("batch_too_large");
  }
  std::string frame;
  frame.reserve(kWalRecordHeaderSize + payload.size());
  const auto length = static_cast<uint32_t>(payload.size());
  PutU32(frame, length);
  PutU32(frame, FrameCrc(length, payload));
  frame.append(payload);
  if (size_ + frame.size() > allocated_)
    Preallocate(size_ + frame.size());
  // At size_, not at the file offset: the next record then overwrites a partial one.
  if (const size_t written = PwriteFully(fd_, frame, size_); written < frame.size()) {
    Status status = IoError("write", path_);
    // Restores the zeros after size_. If even this fails, the next record overwrites the
    // partial one, and replay cuts whatever of it is left as a torn tail.
    if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0)
      allocated_ = size_;
    else
      allocated_ = std::max<uint64_t>(allocated_, size_ + written);
    return status;
  }
  size_ += frame.size();
  allocated_ = std::max(allocated_, size_);
  return OkStatus();
}

Status Wal::Sync() {
  if (::fdatasync(fd_) != 0)
    return IoError("sync", path_);
  return OkStatus();
}

Status Wal::Reset() {
  // Truncated, not zeroed in place: the padding would otherwise hold old records.
  if (::ftruncate(fd_, sizeof kWalMagic) != 0)
    return IoError("truncate", path_);
  allocated_ = sizeof kWalMagic;
  if (::fdatasync(fd_) != 0)
    return IoError("sync", path_);
  size_ = sizeof kWalMagic;
  return OkStatus();
}

}  // namespace expanse::tsdb
