#include "release/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "core/file_util.h"

namespace expanse::release_internal {

UniqueFd::UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status ErrnoStatus(int error, std::string_view action, std::string_view path) {
  std::string message = std::string(action) + " " + std::string(path) + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
      return NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message));
    case EEXIST:
      return AlreadyExistsError(std::move(message));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(message));
    default:
      return FailedPreconditionError(std::move(message));
  }
}

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> contents, fs::ReadSmallFile(path, max_bytes));
  if (!contents)
    return NotFoundError(path + " does not exist");
  return std::move(*contents);
}

Status ReplaceFile(const std::string& path, std::string_view contents, mode_t mode) {
  auto [dir, name] = SplitPath(path);
  return fs::WriteFileAtomically(dir, name, std::string(contents), mode);
}

Status CreateNewFile(const std::string& path, std::string_view contents, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) {
    if (errno == EEXIST)
      return AlreadyExistsError(path + " already exists; refusing to overwrite it");
    return ErrnoStatus(errno, "create", path);
  }
  // The umask may have narrowed `mode`; a key's mode is exactly what we ask for.
  if (::fchmod(fd.get(), mode) != 0 || !fs::WriteFully(fd.get(), contents) ||
      ::fsync(fd.get()) != 0) {
    Status status = ErrnoStatus(errno, "write", path);
    ::unlink(path.c_str());
    return status;
  }
  return OkStatus();
}

}  // namespace expanse::release_internal
