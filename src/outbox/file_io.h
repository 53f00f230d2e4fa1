// Internal to the outbox module: its Status codes and reasons for I/O failures (kUnavailable
// "outbox_io": retry; kResourceExhausted "outbox_disk_full"; kDataLoss "outbox_corrupt"), over
// core/file_util.h's helpers and ErrnoStatus, and the few file operations only the outbox has.
#ifndef EXPANSE_OUTBOX_FILE_IO_H_
#define EXPANSE_OUTBOX_FILE_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::outbox {

// The outbox's status for a failure that a core/file_util.h helper reported: kDataLoss
// ("outbox_corrupt") for a file over its size cap (fs::kFileTooLargeReason: the outbox's own
// files never are), kResourceExhausted ("outbox_disk_full") for a full disk or quota,
// kUnavailable ("outbox_io") otherwise. The message gains the prefix "outbox: ". OK passes.
Status ToOutboxError(const Status& status);
template <typename T>
Result<T> ToOutboxError(Result<T> result) {
  if (result.ok())
    return result;
  return ToOutboxError(result.status());
}

// The status for a failed call, from errno, as ToOutboxError maps it; the message is
// "outbox: <what> <path>: <strerror>".
Status IoError(std::string_view what, const std::string& path);

// Exactly `size` bytes at `offset`; kDataLoss when the file ends first.
Status ReadAt(int fd, uint64_t offset, size_t size, const std::string& path, std::string* out);
Status SyncFile(int fd, const std::string& path);

// True for file systems served over the network (NFS, SMB/CIFS, Lustre, GPFS, BeeGFS, CephFS,
// AFS, 9p): statfs(2) f_type values. The outbox must live on local disk: fsync on a shared
// mount promises less, and two controllers must never share one queue.
bool IsNetworkFilesystem(int64_t filesystem_type);
// The name of the network file system `directory` is on, or "" when it is local.
Result<std::string> NetworkFilesystemName(const std::string& directory);

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_FILE_IO_H_
