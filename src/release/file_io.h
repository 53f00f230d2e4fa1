// Internal to the release module: file descriptors and whole-file helpers on local, trusted
// paths (the release manager's staging directory, the installer's download directory).

#ifndef EXPANSE_RELEASE_FILE_IO_H_
#define EXPANSE_RELEASE_FILE_IO_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::release_internal {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept;
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// kNotFound for ENOENT, kPermissionDenied for EACCES/EPERM, kResourceExhausted for a full disk,
// kFailedPrecondition otherwise; the message is "<action> <path>: <strerror>".
Status ErrnoStatus(int error, std::string_view action, std::string_view path);

// The whole file; kNotFound when it does not exist, kResourceExhausted over `max_bytes`.
Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes);

// Replaces `path` atomically (temporary file, fsync, rename) with `contents` and `mode`.
Status ReplaceFile(const std::string& path, std::string_view contents, mode_t mode);

// Creates `path` with `mode`, refusing (kAlreadyExists) to touch an existing file or to follow
// a symlink; the file is fsync'ed. For keys, which must never overwrite one another.
Status CreateNewFile(const std::string& path, std::string_view contents, mode_t mode);

// "dir/name" split at the last '/' ("." for a bare name).
std::pair<std::string, std::string> SplitPath(const std::string& path);

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_FILE_IO_H_
