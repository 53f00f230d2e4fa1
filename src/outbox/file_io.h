// Internal to the outbox module: the POSIX file operations its durability rests on, with
// errno turned into the outbox's own Status codes and reasons (kUnavailable "outbox_io": retry;
// kDataLoss "outbox_corrupt"). That mapping, O_NOFOLLOW, and the "<name>.tmp" temporary that
// Load() sweeps after a crash are why ReadSmallFile and ReplaceFileAtomically are not
// core/file_util.h's (which map errno to kNotFound/kPermissionDenied/kInternal and follow links);
// the write loop itself is core's fs::WriteFully.
#ifndef EXPANSE_OUTBOX_FILE_IO_H_
#define EXPANSE_OUTBOX_FILE_IO_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::outbox {

// The status for a failed call, from errno: kResourceExhausted for a full disk or quota,
// kUnavailable ("outbox_io") otherwise. The message names the operation and the path.
Status IoError(std::string_view what, const std::string& path);

Status WriteAll(int fd, std::string_view bytes, const std::string& path);
// Exactly `size` bytes at `offset`; kDataLoss when the file ends first.
Status ReadAt(int fd, uint64_t offset, size_t size, const std::string& path, std::string* out);
Status SyncFile(int fd, const std::string& path);
// Makes creations, renames and removals in `directory` durable.
Status SyncDirectory(const std::string& directory);
// The whole file, or nullopt when it does not exist.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes);
// Readers see the old contents or the new, never a mix, also after a crash: a temporary file
// in the same directory is written and synced, renamed over `name`, and the directory synced.
Status ReplaceFileAtomically(const std::string& directory, const std::string& name,
                             std::string_view contents);
// Names of the entries of `directory` (not . or ..).
Result<std::vector<std::string>> ListDirectory(const std::string& directory);

// True for file systems served over the network (NFS, SMB/CIFS, Lustre, GPFS, BeeGFS, CephFS,
// AFS, 9p): statfs(2) f_type values. The outbox must live on local disk: fsync on a shared
// mount promises less, and two controllers must never share one queue.
bool IsNetworkFilesystem(int64_t filesystem_type);
// The name of the network file system `directory` is on, or "" when it is local.
Result<std::string> NetworkFilesystemName(const std::string& directory);

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_FILE_IO_H_
