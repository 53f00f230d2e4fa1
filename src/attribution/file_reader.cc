#include "attribution/file_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/quote.h"

namespace expanse::attribution {
namespace {

Status ErrnoStatus(int error, const std::string& path, std::string_view action) {
  std::string message =
      std::string(action) + " " + QuoteForMessage(path, 200) + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
    case ESRCH:
      return NotFoundError(std::move(message)).WithReason("gone");
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message)).WithReason("permission_denied");
    default:
      return UnavailableError(std::move(message));
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Result<CappedFile> ReadCappedFile(const std::string& path, size_t max_bytes) {
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    return ErrnoStatus(errno, path, "open");
  }
  CappedFile file;
  // Reading one byte past the cap tells a file of exactly max_bytes from a longer one. Chunks keep
  // the usual small file from costing a cap-sized buffer.
  constexpr size_t kChunk = size_t{64} * 1024;
  while (file.bytes.size() <= max_bytes) {
    const size_t filled = file.bytes.size();
    file.bytes.resize(filled + std::min(kChunk, max_bytes + 1 - filled));
    const ssize_t got = read(fd.get(), file.bytes.data() + filled, file.bytes.size() - filled);
    if (got < 0) {
      const int error = errno;
      file.bytes.resize(filled);
      if (error == EINTR) {
        continue;
      }
      return ErrnoStatus(error, path, "read");
    }
    file.bytes.resize(filled + static_cast<size_t>(got));
    if (got == 0) {
      break;
    }
  }
  file.truncated = file.bytes.size() > max_bytes;
  if (file.truncated) {
    file.bytes.resize(max_bytes);
  }
  return file;
}

class SystemReader final : public FileReader {
 public:
  Result<CappedFile> Read(const std::string& path, size_t max_bytes) const override {
    return ReadCappedFile(path, max_bytes);
  }
};

}  // namespace

const FileReader& SystemFileReader() {
  static const SystemReader kReader;
  return kReader;
}

}  // namespace expanse::attribution
