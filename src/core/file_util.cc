#include "core/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

namespace expanse::fs {

namespace {

constexpr uid_t kKeepUid = static_cast<uid_t>(-1);  // fchown's "leave unchanged"
constexpr gid_t kKeepGid = static_cast<gid_t>(-1);

// Reads the rest of the open file `fd` (named `path` in messages), at most `max_bytes`.
Result<std::optional<std::string>> ReadOpenFile(int fd, const std::string& path, size_t max_bytes,
                                                Pipes pipes = Pipes::kRefuse) {
  // Opened with O_NONBLOCK when pipes are refused, so a FIFO put where a file was expected
  // (between a caller's check and this open, say) neither blocks the open nor the read.
  struct stat st {};
  const bool stated = fstat(fd, &st) == 0;
  if (pipes == Pipes::kRefuse) {
    if (!stated)
      return ErrnoStatus(errno, "cannot stat " + path);
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
      return InvalidArgumentError(path + " is a FIFO or socket, not a file")
          .WithReason("not_regular");
    }
  }
  std::string contents;
  // One byte past the cap tells an oversized file without reading all of it.
  const size_t limit = max_bytes == std::numeric_limits<size_t>::max() ? max_bytes : max_bytes + 1;
  // A regular file's size is known: one allocation instead of a string grown (and copied)
  // chunk by chunk. Only a hint: the file may still grow or shrink while it is read.
  if (stated && S_ISREG(st.st_mode) && st.st_size > 0)
    contents.reserve(std::min(static_cast<size_t>(st.st_size) + 1, limit));
  if (!ReadAll(fd, contents, limit))
    return ErrnoStatus(errno, "cannot read " + path);
  if (contents.size() > max_bytes) {
    return ResourceExhaustedError(path + " is larger than " + std::to_string(max_bytes) + " bytes")
        .WithReason(kFileTooLargeReason);
  }
  return std::optional<std::string>(std::move(contents));
}

// The steps both atomic writes share once their temporary `temp_path` is open as `fd`: the
// bytes, the owner (-1 leaves an id unchanged), the mode, fsync and close. fsync comes before
// the caller's rename: otherwise a crash can leave the new name pointing at an empty or partial
// file on file systems that reorder data and metadata writes.
Status FillTemporary(UniqueFd fd, const std::string& temp_path, std::string_view contents,
                     mode_t mode, uid_t uid, gid_t gid) {
  if (!WriteFully(fd.get(), contents))
    return ErrnoStatus(errno, "cannot write " + temp_path);
  if ((uid != kKeepUid || gid != kKeepGid) && fchown(fd.get(), uid, gid) != 0)
    return ErrnoStatus(errno, "cannot chown " + temp_path);
  if (fchmod(fd.get(), mode) != 0)
    return ErrnoStatus(errno, "cannot chmod " + temp_path);
  if (fsync(fd.get()) != 0)
    return ErrnoStatus(errno, "cannot fsync " + temp_path);
  if (close(fd.release()) != 0)
    return ErrnoStatus(errno, "cannot close " + temp_path);
  return OkStatus();
}

// Copies what is left of `from_fd` to `to_fd`, at most `max_bytes` (one more is an error):
// copy_file_range, so the kernel moves the bytes (or shares the extents) without them passing
// through this process; read and write where it cannot (another kind of file system, an old
// kernel).
Status CopyContents(int from_fd, int to_fd, const std::string& from, const std::string& to,
                    size_t max_bytes) {
  constexpr size_t kChunkBytes = size_t{8} << 20;
  size_t copied = 0;
  bool kernel_copy = true;
  std::string buffer;
  while (true) {
    if (copied > max_bytes) {
      return ResourceExhaustedError(from + " is larger than " + std::to_string(max_bytes) +
                                    " bytes")
          .WithReason(kFileTooLargeReason);
    }
    const size_t want = std::min(kChunkBytes, max_bytes + 1 - copied);
    ssize_t n = -1;
    if (kernel_copy) {
      n = copy_file_range(from_fd, nullptr, to_fd, nullptr, want, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
        kernel_copy = false;
        continue;
      }
    } else {
      buffer.resize(std::min(want, size_t{1} << 20));
      n = read(from_fd, buffer.data(), buffer.size());
      if (n > 0 && !WriteFully(to_fd, std::string_view(buffer.data(), static_cast<size_t>(n))))
        return ErrnoStatus(errno, "cannot write " + to);
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ErrnoStatus(errno, "cannot copy " + from + " to " + to);
    }
    if (n == 0)
      return OkStatus();
    copied += static_cast<size_t>(n);
  }
}

// The names in the open directory `fd`, which this takes over and closes.
Result<std::vector<std::string>> ReadDirectoryNames(
    int fd, std::string_view dir_path, size_t max_names = std::numeric_limits<size_t>::max()) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(fd), &closedir);
  if (dir == nullptr) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, "cannot list directory " + std::string(dir_path));
  }
  std::vector<std::string> names;
  while (names.size() < max_names) {
    errno = 0;
    const dirent* entry = readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0)
        return ErrnoStatus(errno, "cannot list directory " + std::string(dir_path));
      return names;
    }
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  return names;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0)
    close(fd_);
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

Status ErrnoStatus(int error, std::string_view what) {
  std::string message = std::string(what) + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(std::move(message));
    case EEXIST:
      return AlreadyExistsError(std::move(message));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty() && path.back() != '/')
    path += '/';
  path += name;
  return path;
}

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

bool ReadAll(int fd, std::string& out, size_t limit) {
  constexpr size_t kChunkBytes = 64 << 10;
  while (out.size() < limit) {
    const size_t before = out.size();
    const size_t want = std::min(kChunkBytes, limit - before);
    out.resize(before + want);
    const ssize_t n = read(fd, out.data() + before, want);
    const int error = errno;
    out.resize(before + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0) {
      if (error == EINTR)
        continue;
      errno = error;
      return false;
    }
    if (n == 0)
      break;
  }
  return true;
}

Result<std::optional<std::string>> ReadSmallFile(const std::string& path, size_t max_bytes,
                                                 Symlinks symlinks, Pipes pipes) {
  const int flags = O_RDONLY | O_CLOEXEC | (pipes == Pipes::kRefuse ? O_NONBLOCK : 0) |
                    (symlinks == Symlinks::kRefuse ? O_NOFOLLOW : 0);
  const UniqueFd fd(open(path.c_str(), flags));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return std::optional<std::string>();
    }
    return ErrnoStatus(errno, "cannot open " + path);
  }
  return ReadOpenFile(fd.get(), path, max_bytes, pipes);
}

Result<std::optional<std::string>> ReadSmallFileAt(int dir_fd, std::string_view dir_path,
                                                   std::string_view name, size_t max_bytes) {
  const std::string path = JoinPath(dir_path, name);
  const std::string name_string(name);
  const UniqueFd fd(
      openat(dir_fd, name_string.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return std::optional<std::string>();
    return ErrnoStatus(errno, "cannot open " + path);
  }
  return ReadOpenFile(fd.get(), path, max_bytes);
}

Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode) {
  return WriteFileAtomically(directory, name, contents, mode, kKeepUid, kKeepGid);
}

Status WriteFileAtomically(const std::string& directory, const std::string& name,
                           const std::string& contents, mode_t mode, uid_t uid, gid_t gid) {
  const std::string path = directory + "/" + name;
  std::string temporary = directory + "/." + name + ".tmp.XXXXXX";
  UniqueFd fd(mkostemp(temporary.data(), O_CLOEXEC));  // created 0600
  if (!fd.valid()) {
    return ErrnoStatus(errno, "cannot create a temporary file in " + directory);
  }
  Status status = FillTemporary(std::move(fd), temporary, contents, mode, uid, gid);
  if (status.ok() && rename(temporary.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "cannot rename " + temporary + " to " + path);
  }
  if (!status.ok()) {
    unlink(temporary.c_str());
    return status;
  }
  // The rename is durable only once the directory entry is.
  return SyncDirectory(directory);
}

Status CopyFileAtomically(const std::string& from, const std::string& directory,
                          const std::string& name, size_t max_bytes, mode_t mode, uid_t uid,
                          gid_t gid) {
  const UniqueFd source(open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!source.valid()) {
    if (errno == ENOENT)
      return NotFoundError(from + " vanished before it was copied");
    return ErrnoStatus(errno, "cannot open " + from);
  }
  struct stat st {};
  if (fstat(source.get(), &st) != 0)
    return ErrnoStatus(errno, "cannot stat " + from);
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(from + " is not a regular file").WithReason("not_regular");
  const std::string path = directory + "/" + name;
  std::string temporary = directory + "/." + name + ".tmp.XXXXXX";
  UniqueFd fd(mkostemp(temporary.data(), O_CLOEXEC));  // created 0600
  if (!fd.valid())
    return ErrnoStatus(errno, "cannot create a temporary file in " + directory);
  Status status = CopyContents(source.get(), fd.get(), from, temporary, max_bytes);
  if (status.ok())
    status = FillTemporary(std::move(fd), temporary, {}, mode, uid, gid);
  if (status.ok() && rename(temporary.c_str(), path.c_str()) != 0)
    status = ErrnoStatus(errno, "cannot rename " + temporary + " to " + path);
  if (!status.ok()) {
    unlink(temporary.c_str());
    return status;
  }
  return SyncDirectory(directory);
}

Status WriteFileAtomicallyAt(int dir_fd, std::string_view dir_path, const std::string& name,
                             const std::string& temp_name, std::string_view contents, mode_t mode) {
  const std::string temp_path = JoinPath(dir_path, temp_name);
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(openat(dir_fd, temp_name.c_str(), kFlags, 0600));
  if (!fd.valid() && errno == EEXIST) {
    // Left by a writer that crashed before its rename, so nothing reads it.
    if (unlinkat(dir_fd, temp_name.c_str(), 0) == 0) {
      fd = UniqueFd(openat(dir_fd, temp_name.c_str(), kFlags, 0600));
    } else {
      errno = EEXIST;
    }
  }
  if (!fd.valid())
    return ErrnoStatus(errno, "cannot create " + temp_path);
  Status status = FillTemporary(std::move(fd), temp_path, contents, mode, kKeepUid, kKeepGid);
  if (status.ok() && renameat(dir_fd, temp_name.c_str(), dir_fd, name.c_str()) != 0)
    status = ErrnoStatus(errno, "cannot rename " + temp_path + " to " + JoinPath(dir_path, name));
  if (!status.ok()) {
    unlinkat(dir_fd, temp_name.c_str(), 0);
    return status;
  }
  // The rename is durable only once the directory is; on NFS this commits it on the server.
  if (fsync(dir_fd) != 0)
    return ErrnoStatus(errno, "cannot fsync directory " + std::string(dir_path));
  return OkStatus();
}

Result<std::vector<std::string>> ListDirectory(const std::string& directory) {
  const int fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoStatus(errno, "cannot open directory " + directory);
  return ReadDirectoryNames(fd, directory);
}

Result<std::vector<std::string>> ListDirectoryAt(int dir_fd, std::string_view dir_path,
                                                 size_t max_names) {
  // A fresh descriptor for ".": fdopendir on a dup would share (and move) dir_fd's offset.
  const int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoStatus(errno, "cannot open directory " + std::string(dir_path));
  return ReadDirectoryNames(fd, dir_path, max_names);
}

Status SyncDirectory(const std::string& directory) {
  const UniqueFd fd(open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return ErrnoStatus(errno, "cannot open directory " + directory);
  // EINVAL/EBADF: a file system that cannot sync a directory (vboxsf, some FUSE ones), where
  // nothing more can be done; PostgreSQL and SQLite go on there too.
  if (fsync(fd.get()) != 0 && errno != EINVAL && errno != EBADF)
    return ErrnoStatus(errno, "cannot fsync directory " + directory);
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
