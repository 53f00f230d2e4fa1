#include "outbox/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "core/file_util.h"

namespace expanse::outbox {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};

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

Status IoError(std::string_view what, const std::string& path) {
  const int err = errno;
  std::string message = "outbox: " + std::string(what) + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT)
    return ResourceExhaustedError(std::move(message)).WithReason("outbox_disk_full");
  return UnavailableError(std::move(message)).WithReason("outbox_io");
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  if (!fs::WriteFully(fd, bytes))
    return IoError("write", path);
  return OkStatus();
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

Status SyncDirectory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return IoError("open directory", directory);
  FdCloser closer{fd};
  if (::fsync(fd) != 0)
    return IoError("sync directory", directory);
  return OkStatus();
}

Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT)
      return std::optional<std::string>();
    return IoError("open", path);
  }
  FdCloser closer{fd};
  std::string contents;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return IoError("read", path);
    }
    if (n == 0)
      return std::optional<std::string>(std::move(contents));
    contents.append(buffer, static_cast<size_t>(n));
    if (contents.size() > max_bytes) {
      return DataLossError("outbox: " + path + " is larger than " + std::to_string(max_bytes) +
                           " bytes")
          .WithReason("outbox_corrupt");
    }
  }
}

Status ReplaceFileAtomically(const std::string& directory, const std::string& name,
                             std::string_view contents) {
  const std::string target = directory + "/" + name;
  const std::string temporary = target + ".tmp";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return IoError("create", temporary);
  Status status = WriteAll(fd, contents, temporary);
  if (status.ok() && ::fsync(fd) != 0)
    status = IoError("sync", temporary);
  ::close(fd);
  if (status.ok() && ::rename(temporary.c_str(), target.c_str()) != 0)
    status = IoError("rename", temporary);
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  return SyncDirectory(directory);
}

Result<std::vector<std::string>> ListDirectory(const std::string& directory) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(directory.c_str()), ::closedir);
  if (!dir)
    return IoError("list", directory);
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0)
        return IoError("list", directory);
      return names;
    }
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
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
