// Small, careful file operations: the one set of file helpers the modules build on. Reading a
// bounded file, replacing a file atomically (also across a crash), listing and syncing
// directories, creating directories, an owning file descriptor and the errno-to-Status mapping.
// The path-based helpers are for trusted local paths (the certificate store, the daemon's
// credential config, the installer, the release manager). The "...At" helpers work relative to
// a directory descriptor and never follow a symlink in the last component: the spool uses them
// for its own files, and builds its hostile-file readers (src/spool/hostile_read.h) on them.
//
// Errors follow ErrnoStatus below. A module whose callers branch on codes and reasons of its
// own (the outbox's and the spool's retry policy, say) maps these statuses at the call site.

#ifndef EXPANSE_CORE_FILE_UTIL_H_
#define EXPANSE_CORE_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::fs {

// Owns a file descriptor and closes it when destroyed or assigned over; -1 when empty.
// close(2) errors are not reported: a caller that must see them (data on NFS is only
// committed at close) closes release() itself.
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
  // Hands the descriptor to the caller and leaves this empty.
  int release();

 private:
  int fd_ = -1;
};

// The Status for errno `error` of a failed call that `what` describes ("cannot open /x",
// "open archive /x"): the message is "<what>: <strerror>". ENOENT and ENOTDIR → kNotFound;
// EACCES, EPERM and EROFS → kPermissionDenied; EEXIST → kAlreadyExists; ENOSPC and EDQUOT →
// kResourceExhausted; anything else → kInternal. No reason is set.
Status ErrnoStatus(int error, std::string_view what);

// `path` split at its last '/' into {directory, name}: {".", path} when there is no '/',
// {"/", name} for "/name".
std::pair<std::string, std::string> SplitPath(const std::string& path);

// `dir` + "/" + `name`, without doubling a '/' that ends `dir`; just `name` when `dir` is empty.
std::string JoinPath(std::string_view dir, std::string_view name);

// Writes all of `bytes` to `fd`, continuing after short writes and EINTR. On failure returns
// false with errno as the failed write(2) left it: a building block for modules that map errno
// to Status codes and reasons of their own (the outbox, the telemetry WAL), so it returns no
// Status itself.
bool WriteFully(int fd, std::string_view bytes);

// Appends what `fd` holds from its offset on to `out` until end of file, or until `out` holds
// `limit` bytes (a caller passes cap + 1 to tell an oversized file without reading all of it).
// Continues after short reads and EINTR. On failure returns false with errno as the failed
// read(2) left it, as WriteFully does; `out` keeps what was read before.
bool ReadAll(int fd, std::string& out, size_t limit = std::numeric_limits<size_t>::max());

// The reason on ReadSmallFile's kResourceExhausted for a file over `max_bytes`, so a caller
// tells it from a full disk.
inline constexpr char kFileTooLargeReason[] = "file_too_large";

// Whether ReadSmallFile opens a symlink's target or fails (O_NOFOLLOW: kInternal, ELOOP).
enum class Symlinks { kFollow, kRefuse };
// Whether ReadSmallFile refuses a FIFO or socket at once (what anything another party may
// have written needs: a FIFO held open would hang the reader), or reads it to its end (a
// path an operator gave on the command line, e.g. --cosign-key <(vault read ...)).
enum class Pipes { kRefuse, kRead };

// The contents of `path`, or nullopt when it does not exist. kResourceExhausted (reason
// kFileTooLargeReason) when it is larger than `max_bytes`; with Pipes::kRefuse a FIFO or socket
// is refused at once (reason "not_regular"), never waited on; other failures from ErrnoStatus.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes,
                                                 Symlinks symlinks = Symlinks::kFollow,
                                                 Pipes pipes = Pipes::kRefuse);

// As ReadSmallFile, for `name` in the directory open as `dir_fd`, never following a symlink
// there. `dir_path` names the directory in messages only.
Result<std::optional<std::string>> ReadSmallFileAt(int dir_fd, std::string_view dir_path,
                                                   std::string_view name, size_t max_bytes);

// Replaces `directory`/`name` with `contents` so that readers see the old file or
// the new one, never a mix, even across a crash: a temporary file in the same
// directory is written, chmod'ed to `mode`, fsync'ed and renamed over the target,
// then the directory is fsync'ed. The temporary file is removed on failure.
Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode);

// As above, and the file is owned by `uid`:`gid` before it appears under its name (a
// credential readable only by the daemon user must never exist with other ownership).
Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode, uid_t uid, gid_t gid);

// The same replacement of `directory`/`name`, with the bytes of the regular file `from`
// streamed (never whole in memory: release binaries are large). kResourceExhausted (reason
// file_too_large) past `max_bytes`, kNotFound when `from` does not exist.
Status CopyFileAtomically(const std::string& from, const std::string& directory,
                          const std::string& name, size_t max_bytes, mode_t mode, uid_t uid,
                          gid_t gid);

// The same replacement in the directory open as `dir_fd`, through a temporary the caller
// names (a format that documents it, or sweeps it after a crash): `temp_name` is created with
// O_EXCL | O_NOFOLLOW (one left over by a crash is removed first and created afresh), written,
// chmod'ed to `mode`, fsync'ed and closed (a close error fails the call: NFS reports write
// errors there), renamed over `name` and the directory fsync'ed. The temporary is removed on
// failure. `dir_path` names the directory in messages only.
Status WriteFileAtomicallyAt(int dir_fd, std::string_view dir_path, const std::string& name,
                             const std::string& temp_name, std::string_view contents, mode_t mode);

// Names of the entries of `directory`, without "." and "..", in directory order.
Result<std::vector<std::string>> ListDirectory(const std::string& directory);

// As ListDirectory, for the directory open as `dir_fd`; its file offset is left alone.
// `dir_path` names the directory in messages only. At most `max_names` (a directory others
// write into can hold millions).
Result<std::vector<std::string>> ListDirectoryAt(
    int dir_fd, std::string_view dir_path, size_t max_names = std::numeric_limits<size_t>::max());

// Makes creations, renames and removals in `directory` durable (fsync of the directory); OK on a
// file system that cannot sync a directory (EINVAL, EBADF).
Status SyncDirectory(const std::string& directory);

// Creates `directory` (and missing parents) with `mode` unless it exists.
Status MakeDirectories(const std::string& directory, mode_t mode);

}  // namespace expanse::fs

#endif  // EXPANSE_CORE_FILE_UTIL_H_
