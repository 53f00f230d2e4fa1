#include "outbox/file_io.h"

#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/file_util.h"

namespace expanse::outbox {
namespace {

struct NetworkFilesystem {
  uint32_t type;
  const char* name;
};

// From statfs(2) and the file systems' own headers.
constexpr NetworkFilesystem kNetworkFilesystems[] = {
    {0x6969, "nfs"},        {0x517B, "smb"},      {0xFF534D42, "cifs"},   {0xFE534D42, "smb2"},
    {0x0BD00BD0, "lustre"}, {0x47504653, "gpfs"}, {0x19830326, "beegfs"}, {0x00C36400, "cephfs"},
    {0x5346414F, "afs"},    {0x6B414653, "afs"},  {0x01021997, "9p"},     {0x73757245, "coda"},
    {0x564C, "ncp"},        {0x01161970, "gfs2"}, {0x7461636F, "ocfs2"},
};

const char* NetworkFilesystemNameOf(int64_t filesystem_type) {
  const auto type = static_cast<uint32_t>(static_cast<uint64_t>(filesystem_type));
  for (const NetworkFilesystem& fs : kNetworkFilesystems) {
    if (fs.type == type)
      return fs.name;
  }
  return nullptr;
}

}  // namespace

Status ToOutboxError(const Status& status) {
  if (status.ok())
    return status;
  std::string message = "outbox: " + status.message();
  if (status.reason() == fs::kFileTooLargeReason)
    return DataLossError(std::move(message)).WithReason("outbox_corrupt");
  if (status.code() == StatusCode::kResourceExhausted)
    return ResourceExhaustedError(std::move(message)).WithReason("outbox_disk_full");
  return UnavailableError(std::move(message)).WithReason("outbox_io");
}

Status IoError(std::string_view what, const std::string& path) {
  return ToOutboxError(fs::ErrnoStatus(errno, std::string(what) + " " + path));
}

Status ReadAt(int fd, uint64_t offset, size_t size, const std::string& path, std::string* out) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::pread(fd, out->data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return IoError("read", path);
    }
    if (n == 0) {
      return DataLossError("outbox: " + path + " ends at " + std::to_string(offset + done) +
                           ", before the record it indexes")
          .WithReason("outbox_corrupt");
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

Status SyncFile(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0)
    return IoError("sync", path);
  return OkStatus();
}

bool IsNetworkFilesystem(int64_t filesystem_type) {
  return NetworkFilesystemNameOf(filesystem_type) != nullptr;
}

Result<std::string> NetworkFilesystemName(const std::string& directory) {
  struct statfs info {};
  if (::statfs(directory.c_str(), &info) != 0)
    return IoError("statfs", directory);
  const char* name = NetworkFilesystemNameOf(static_cast<int64_t>(info.f_type));
  return std::string(name != nullptr ? name : "");
}

}  // namespace expanse::outbox
