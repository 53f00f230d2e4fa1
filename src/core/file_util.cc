#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace expanse::fs {

namespace {

Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = what + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(message);
    default:
      return InternalError(message);
  }
}

// Closes on scope exit; close(2) errors after fsync are not actionable here.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

bool WriteFully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes) {
  const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return std::optional<std::string>();
    }
    return ErrnoStatus(errno, "cannot open " + path);
  }
  std::string contents;
  char buffer[8192];
  while (true) {
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoStatus(errno, "cannot read " + path);
    }
    if (n == 0) {
      return std::optional<std::string>(std::move(contents));
    }
    if (contents.size() + static_cast<size_t>(n) > max_bytes) {
      return ResourceExhaustedError(path + " is larger than " + std::to_string(max_bytes) +
                                    " bytes");
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
}

Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode) {
  return WriteFileAtomically(directory, name, contents, mode, static_cast<uid_t>(-1),
                             static_cast<gid_t>(-1));
}

Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode, uid_t uid, gid_t gid) {
  const std::string path = directory + "/" + name;
  std::string temporary = directory + "/." + name + ".tmp.XXXXXX";
  const int raw_fd = mkostemp(temporary.data(), O_CLOEXEC);  // created 0600
  if (raw_fd < 0) {
    return ErrnoStatus(errno, "cannot create a temporary file in " + directory);
  }
  Status status;
  {
    const FileDescriptor fd(raw_fd);
    if (!WriteFully(fd.get(), contents)) {
      status = ErrnoStatus(errno, "cannot write " + temporary);
    }
    // -1 leaves an id unchanged (fchown's convention).
    if (status.ok() && (uid != static_cast<uid_t>(-1) || gid != static_cast<gid_t>(-1)) &&
        fchown(fd.get(), uid, gid) != 0) {
      status = ErrnoStatus(errno, "cannot chown " + temporary);
    }
    if (status.ok() && fchmod(fd.get(), mode) != 0) {
      status = ErrnoStatus(errno, "cannot chmod " + temporary);
    }
    if (status.ok() && fsync(fd.get()) != 0) {
      status = ErrnoStatus(errno, "cannot fsync " + temporary);
    }
  }
  if (status.ok() && rename(temporary.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "cannot rename " + temporary + " to " + path);
  }
  if (!status.ok()) {
    unlink(temporary.c_str());
    return status;
  }
  // The rename is durable only once the directory entry is.
  const FileDescriptor dir(open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || fsync(dir.get()) != 0) {
    return ErrnoStatus(errno, "cannot fsync directory " + directory);
  }
  return OkStatus();
}

Status MakeDirectories(const std::string& directory, mode_t mode) {
  if (directory.empty()) {
    return InvalidArgumentError("no directory given");
  }
  for (size_t slash = directory.find('/', 1);; slash = directory.find('/', slash + 1)) {
    const std::string prefix = directory.substr(0, slash);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "cannot create directory " + prefix);
    }
    if (slash == std::string::npos) {
      break;
    }
  }
  struct stat info {};
  if (stat(directory.c_str(), &info) != 0) {
    return ErrnoStatus(errno, "cannot stat " + directory);
  }
  if (!S_ISDIR(info.st_mode)) {
    return FailedPreconditionError(directory + " exists but is not a directory");
  }
  return OkStatus();
}

}  // namespace expanse::fs
