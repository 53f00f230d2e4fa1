#include "install/install_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/status.h"

namespace expanse::install {

Result<InstallLock> InstallLock::Acquire(const std::string& path) {
  // O_NOFOLLOW: the lock lives in a root-owned directory, but a symlink planted there must not
  // make root create or truncate a file elsewhere. The file is never written, only locked.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == EACCES || err == EPERM || err == EROFS) {
      return PermissionDeniedError("open install lock " + path + ": permission denied; re-run " +
                                   "with sudo (an empty lock file left by an earlier root " +
                                   "install is normal and does not mean one is running)")
          .WithReason("install_lock_permission");
    }
    return UnavailableError("open install lock " + path + ": " + std::strerror(err))
        .WithReason("install_lock_open");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPreconditionError("another expanse compute install or uninstall holds " + path +
                                     "; wait for it to finish (do not delete the lock file)")
          .WithReason("install_in_progress");
    }
    return UnavailableError("lock " + path + ": " + std::strerror(err))
        .WithReason("install_lock_open");
  }
  return InstallLock(path, fd);
}

InstallLock::InstallLock(InstallLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

InstallLock& InstallLock::operator=(InstallLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

InstallLock::~InstallLock() {
  if (fd_ >= 0)
    ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace expanse::install
