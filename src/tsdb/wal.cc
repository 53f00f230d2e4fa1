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

}  // namespace

Result<std::unique_ptr<Wal>> Wal::Open(const std::string& path, const ReplayFn& replay,
                                       const LogFn& log) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return IoError("open", path);
  std::unique_ptr<Wal> wal(new Wal(path, fd, 0));
  std::string contents;
  if (!fs::ReadAll(fd, contents))
    return IoError("read", path);
  const size_t file_size = contents.size();
  const std::string_view magic(kWalMagic, sizeof kWalMagic);
  size_t good_end = 0;
  if (contents.size() >= magic.size() && std::string_view(contents).substr(0, 8) == magic) {
    good_end = magic.size();
    ByteReader in(std::string_view(contents).substr(good_end));
    while (!in.empty()) {
      const uint32_t length = in.U32();
      const uint32_t crc = in.U32();
      if (in.ok() && length == 0 && crc == 0) {
        // No record is empty: this is the zero padding after the last record, the clean
        // end of the log unless a torn write left something further on.
        const std::string_view rest = std::string_view(contents).substr(good_end);
        if (rest.find_first_not_of('\0') == std::string_view::npos)
          contents.resize(good_end);
        break;
      }
      if (!in.ok() || length > kMaxWalRecordBytes || length > in.remaining())
        break;
      const std::string_view payload = in.Bytes(length);
      if (FrameCrc(length, payload) != crc)
        break;
      EXPANSE_RETURN_IF_ERROR(replay(payload));
      good_end += kWalRecordHeaderSize + length;
    }
  } else if (!contents.empty()) {
    log("tsdb wal: " + path + " does not start with the WAL magic; discarding its " +
        std::to_string(contents.size()) + " bytes");
  }
  const bool padded = good_end < file_size && good_end == contents.size();
  if (good_end < contents.size() && good_end > 0) {
    log("tsdb wal: " + path + ": cut " + std::to_string(contents.size() - good_end) +
        " bytes of torn or corrupt tail at offset " + std::to_string(good_end));
  }
  if (good_end == 0) {
    if (::ftruncate(fd, 0) != 0)
      return IoError("truncate", path);
    if (::lseek(fd, 0, SEEK_SET) < 0)
      return IoError("seek", path);
    if (!fs::WriteFully(fd, magic))
      return IoError("write", path);
    good_end = magic.size();
  } else if ((good_end < contents.size() || padded) &&
             ::ftruncate(fd, static_cast<off_t>(good_end)) != 0) {
    return IoError("truncate", path);
  }
  if (::lseek(fd, static_cast<off_t>(good_end), SEEK_SET) < 0)
    return IoError("seek", path);
  if (::fdatasync(fd) != 0)
    return IoError("sync", path);
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
  if (!fs::WriteFully(fd_, frame)) {
    Status status = IoError("write", path_);
    // Restore the invariant so the next record does not follow a partial one. If even
    // this fails, replay will cut the partial record as a torn tail.
    if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0) {
      (void)::lseek(fd_, static_cast<off_t>(size_), SEEK_SET);
      allocated_ = size_;
    }
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
  if (::lseek(fd_, sizeof kWalMagic, SEEK_SET) < 0)
    return IoError("seek", path_);
  if (::fdatasync(fd_) != 0)
    return IoError("sync", path_);
  size_ = sizeof kWalMagic;
  return OkStatus();
}

}  // namespace expanse::tsdb
