#include "spool/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "spool/spool_names.h"

namespace expanse::spool {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0)
    ::close(fd_);
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

Status ErrnoStatus(int err, std::string_view what, std::string_view path) {
  std::string message = "spool: ";
  message += what;
  message += ' ';
  message += path;
  message += ": ";
  message += std::strerror(err);
  if (err == ENOSPC || err == EDQUOT)
    return ResourceExhaustedError(std::move(message)).WithReason("spool_disk_full");
  if (err == ENOENT)
    return NotFoundError(std::move(message));
  return UnavailableError(std::move(message)).WithReason("spool_io");
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty() && path.back() != '/')
    path += '/';
  path += name;
  return path;
}

Result<UniqueFd> OpenConfiguredDirectory(const std::string& path, bool create, mode_t mode) {
  if (create && ::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return ErrnoStatus(errno, "create directory", path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return ErrnoStatus(errno, "open directory", path);
  return fd;
}

Status ReadUpTo(int fd, size_t limit, std::string_view path, std::string& out) {
  char buffer[1 << 16];
  while (out.size() < limit) {
    const size_t want = std::min(sizeof buffer, limit - out.size());
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (n == 0)
      break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return OkStatus();
}

Status WriteFileAtomically(int dir_fd, std::string_view dir_path, std::string_view name,
                           std::string_view bytes, mode_t mode) {
  const std::string temp = TempFileName(name);
  const std::string temp_path = JoinPath(dir_path, temp);
  UniqueFd fd(
      ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid())
    return ErrnoStatus(errno, "create", temp_path);
  const auto fail = [&](std::string_view what) {
    const Status status = ErrnoStatus(errno, what, temp_path);
    fd = UniqueFd();
    (void)::unlinkat(dir_fd, temp.c_str(), 0);
    return status;
  };
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail("write");
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty or
  // partial file on file systems that reorder data and metadata writes.
  if (::fsync(fd.get()) != 0)
    return fail("fsync");
  if (::close(fd.release()) != 0)
    return fail("close");
  const std::string final_name(name);
  if (::renameat(dir_fd, temp.c_str(), dir_fd, final_name.c_str()) != 0)
    return fail("rename");
  // The rename is durable only once the directory is; on NFS this commits it on the server.
  if (::fsync(dir_fd) != 0)
    return ErrnoStatus(errno, "fsync directory", dir_path);
  return OkStatus();
}

Result<std::vector<std::string>> ListDirectory(int dir_fd, std::string_view dir_path) {
  // A fresh descriptor for ".": fdopendir on a dup would share (and move) dir_fd's offset.
  const int list_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list_fd < 0)
    return ErrnoStatus(errno, "open directory", dir_path);
  DIR* dir = ::fdopendir(list_fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(list_fd);
    return ErrnoStatus(err, "list directory", dir_path);
  }
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr)
      break;
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0)
    return ErrnoStatus(err, "list directory", dir_path);
  return names;
}

Result<std::optional<std::string>> ReadLocalFile(int dir_fd, std::string_view dir_path,
                                                 std::string_view name, size_t max_bytes) {
  const std::string path = JoinPath(dir_path, name);
  const std::string name_string(name);
  UniqueFd fd(::openat(dir_fd, name_string.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return std::optional<std::string>();
    return ErrnoStatus(errno, "open", path);
  }
  std::string contents;
  EXPANSE_RETURN_IF_ERROR(ReadUpTo(fd.get(), max_bytes + 1, path, contents));
  if (contents.size() > max_bytes) {
    return ResourceExhaustedError("spool: " + path + " exceeds " + std::to_string(max_bytes) +
                                  " bytes; it is not a file Expanse wrote")
        .WithReason("spool_state_too_large");
  }
  return std::optional<std::string>(std::move(contents));
}

}  // namespace expanse::spool
