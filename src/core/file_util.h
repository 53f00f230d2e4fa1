// Small, careful file operations on trusted local paths: reading a bounded file, replacing a
// file atomically (also across a crash), creating directories. Shared by the certificate
// store, the daemon's credential config and the installer. (Files on the shared spool are
// hostile input and go through src/spool's descriptor-relative readers instead.)

#ifndef EXPANSE_CORE_FILE_UTIL_H_
#define EXPANSE_CORE_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::fs {

// The contents of `path`, or nullopt when it does not exist. kResourceExhausted when
// it is larger than `max_bytes`; other failures map from errno.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes);

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

// Writes all of `bytes` to `fd`, continuing after short writes and EINTR. On failure returns
// false with errno as the failed write(2) left it: a building block for modules that map errno
// to Status codes and reasons of their own (the outbox, the telemetry WAL), so it returns no
// Status itself.
bool WriteFully(int fd, std::string_view bytes);

// Creates `directory` (and missing parents) with `mode` unless it exists.
Status MakeDirectories(const std::string& directory, mode_t mode);

}  // namespace expanse::fs

#endif  // EXPANSE_CORE_FILE_UTIL_H_
