// Internal to the spool module: its Status codes and reasons for I/O failures over
// core/file_util.h, and the few file-system steps only the spool has. All paths below a
// configured root are opened relative to a directory descriptor (fs::...At), never by
// re-walking a path, so a swapped symlink cannot redirect them.
#ifndef EXPANSE_SPOOL_FS_UTIL_H_
#define EXPANSE_SPOOL_FS_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_util.h"
#include "core/result.h"

namespace expanse::spool {

// The spool's status for a failure a core/file_util.h helper reported: kResourceExhausted
// (reason "spool_disk_full") for a full disk or quota, kNotFound as it is (a vanished entry is
// skipped), kUnavailable (reason "spool_io": leave it for the next round) otherwise. The message
// gains the prefix "spool: ". OK passes.
Status ToSpoolError(const Status& status);
template <typename T>
Result<T> ToSpoolError(Result<T> result) {
  if (result.ok())
    return result;
  return ToSpoolError(result.status());
}

// The status for errno `err` of a failed call, as ToSpoolError maps it; the message is
// "spool: <what> <path>: <strerror>".
Status IoError(int err, std::string_view what, std::string_view path);

// Opens a configured directory (trusted path), creating its last component with `mode` when
// `create` is set and it is missing.
Result<fs::UniqueFd> OpenConfiguredDirectory(const std::string& path, bool create, mode_t mode);

// Replaces `name` in `dir_fd` with `bytes` (fs::WriteFileAtomicallyAt) through the spool's
// temporary name, TempFileName(name), which readers skip and the aggregator sweeps.
// `dir_path` is for messages only.
Status ReplaceFile(int dir_fd, std::string_view dir_path, const std::string& name,
                   std::string_view bytes, mode_t mode);

// A trusted local file's contents (fs::ReadSmallFileAt: no symlink followed), nullopt when it
// does not exist. kResourceExhausted (reason "spool_state_too_large") over `max_bytes`.
Result<std::optional<std::string>> ReadLocalFile(int dir_fd, std::string_view dir_path,
                                                 std::string_view name, size_t max_bytes);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_FS_UTIL_H_
