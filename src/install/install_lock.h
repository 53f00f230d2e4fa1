// The install lock: one `expanse compute install|uninstall` at a time on a host.
//
// flock(2) on /var/lib/expanse-install/install.lock (or another path for tests). The kernel
// releases the lock when the process exits, however it exits, so an empty lock file left behind by
// an earlier run is just a file: its presence never means an install is running, and nobody has to
// delete it by hand.

#ifndef EXPANSE_INSTALL_INSTALL_LOCK_H_
#define EXPANSE_INSTALL_INSTALL_LOCK_H_

#include <string>

#include "core/result.h"

namespace expanse::install {

inline constexpr char kDefaultInstallLockPath[] = "/var/lib/expanse-install/install.lock";

class InstallLock {
 public:
  // Opens (creating it 0600 if needed) and takes the lock without waiting. Errors:
  //   permission denied → kPermissionDenied, reason install_lock_permission, with the advice to
  //     re-run with sudo (the message starts "open install lock <path>: permission denied");
  //   held by another process → kFailedPrecondition, reason install_in_progress.
  static Result<InstallLock> Acquire(const std::string& path = kDefaultInstallLockPath);

  InstallLock(InstallLock&& other) noexcept;
  InstallLock& operator=(InstallLock&& other) noexcept;
  InstallLock(const InstallLock&) = delete;
  InstallLock& operator=(const InstallLock&) = delete;
  ~InstallLock();

  const std::string& path() const { return path_; }

 private:
  InstallLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_INSTALL_LOCK_H_
