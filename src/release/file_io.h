// Internal to the release module: whole-file helpers on local, trusted paths (the release
// manager's staging directory, the installer's download directory), on core/file_util.h.

#ifndef EXPANSE_RELEASE_FILE_IO_H_
#define EXPANSE_RELEASE_FILE_IO_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::release_internal {

// The whole file; kNotFound when it does not exist, kResourceExhausted over `max_bytes`.
Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes);

// As ReadWholeFile, for files another party may have placed (a staged archive and its .sig on
// the shared mount): a FIFO or socket is refused at once, never waited on (a FIFO would hang
// every root Prolog that reads it).
Result<std::string> ReadStagedFile(const std::string& path, size_t max_bytes);

// Replaces `path` atomically (temporary file, fsync, rename) with `contents` and `mode`.
Status ReplaceFile(const std::string& path, std::string_view contents, mode_t mode);

// Creates `path` with `mode`, refusing (kAlreadyExists) to touch an existing file or to follow
// a symlink; the file is fsync'ed. For keys, which must never overwrite one another.
Status CreateNewFile(const std::string& path, std::string_view contents, mode_t mode);

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_FILE_IO_H_
