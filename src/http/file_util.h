// Internal to the http module: the small, careful file operations the self-signed
// certificate store needs. (Candidates for core's planned file-system primitives.)

#ifndef EXPANSE_HTTP_FILE_UTIL_H_
#define EXPANSE_HTTP_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "core/result.h"
#include "core/status.h"

namespace expanse::http_internal {

// The contents of `path`, or nullopt when it does not exist. kResourceExhausted when
// it is larger than `max_bytes`; other failures map from errno.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes);

// Replaces `directory`/`name` with `contents` so that readers see the old file or
// the new one, never a mix, even across a crash: a temporary file in the same
// directory is written, chmod'ed to `mode`, fsync'ed and renamed over the target,
// then the directory is fsync'ed. The temporary file is removed on failure.
Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode);

// Creates `directory` (and missing parents) with `mode` unless it exists.
Status MakeDirectories(const std::string& directory, mode_t mode);

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_FILE_UTIL_H_
