// Internal to the spool module: the few POSIX file-system steps the writer and the
// aggregator share. All paths below a configured root are opened relative to a directory
// descriptor, never by re-walking a path, so a swapped symlink cannot redirect them.
#ifndef EXPANSE_SPOOL_FS_UTIL_H_
#define EXPANSE_SPOOL_FS_UTIL_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::spool {

// Owns a file descriptor; -1 when empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// A Status for the errno of a failed call: kResourceExhausted (reason "spool_disk_full") for
// ENOSPC/EDQUOT, kNotFound for ENOENT, kUnavailable (reason "spool_io") otherwise.
Status ErrnoStatus(int err, std::string_view what, std::string_view path);

// Opens a configured directory (trusted path), creating its last component with `mode` when
// `create` is set and it is missing.
Result<UniqueFd> OpenConfiguredDirectory(const std::string& path, bool create, mode_t mode);

// Writes `bytes` to `name` in `dir_fd` so that a reader sees the old file or the whole new
// one, never a part: a temporary name in the same directory, fsync, rename, fsync of the
// directory. The temporary file is removed on failure. `dir_path` is for messages only.
Status WriteFileAtomically(int dir_fd, std::string_view dir_path, std::string_view name,
                           std::string_view bytes, mode_t mode);

// Names in `dir_fd`, without "." and "..", in directory order.
Result<std::vector<std::string>> ListDirectory(int dir_fd, std::string_view dir_path);

// A trusted local file's contents, nullopt when it does not exist. kResourceExhausted when
// it exceeds `max_bytes`.
Result<std::optional<std::string>> ReadLocalFile(int dir_fd, std::string_view dir_path,
                                                 std::string_view name, size_t max_bytes);

// Reads until EOF or until `limit` bytes are in `out` (so a caller can pass cap + 1 to
// detect an oversized file without reading all of it).
Status ReadUpTo(int fd, size_t limit, std::string_view path, std::string& out);

std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_FS_UTIL_H_
