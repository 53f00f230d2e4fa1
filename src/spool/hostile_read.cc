#include "spool/hostile_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/quote.h"
#include "spool/fs_util.h"
#include "spool/reasons.h"

namespace expanse::spool {
namespace {

Status Refused(const char* reason, std::string_view path, const std::string& detail) {
  return DataLossError("spool: refused " + QuoteForMessage(path, 200) + " (" + reason +
                       "): " + detail)
      .WithReason(reason);
}

Status OpenError(int err, std::string_view path) {
  if (err == ENOENT)
    return NotFoundError("spool: " + QuoteForMessage(path, 200) + " vanished");
  // O_NOFOLLOW on a symlink fails with ELOOP: the entry was swapped after the lstat.
  if (err == ELOOP)
    return Refused(reason::kSymlink, path, "is a symbolic link");
  // The writer's mode keeps the reader out: the writer's doing (a hostile mode 000), not a
  // passing failure, which callers may treat as a refusal.
  if (err == EACCES || err == EPERM)
    return IoError(err, "open", QuoteForMessage(path, 200)).WithReason(reason::kPermissionDenied);
  return IoError(err, "open", QuoteForMessage(path, 200)).WithReason(reason::kUnreadable);
}

}  // namespace

Result<std::string_view> ReadHostileFile(int dir_fd, std::string_view dir_path,
                                         std::string_view name, const HostileReadLimits& limits,
                                         std::string& buffer, uid_t* owner) {
  const std::string path = fs::JoinPath(dir_path, name);
  const std::string name_string(name);
  struct stat st {};
  // lstat first: opening a device or FIFO can have side effects, so those are never opened.
  if (::fstatat(dir_fd, name_string.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return OpenError(errno, path);
  if (S_ISLNK(st.st_mode))
    return Refused(reason::kSymlink, path, "is a symbolic link");
  if (!S_ISREG(st.st_mode))
    return Refused(reason::kNotRegular, path, "is not a regular file");

  fs::UniqueFd fd(::openat(dir_fd, name_string.c_str(),
                           O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid())
    return OpenError(errno, path);
  // These checks are on the opened file, so swapping the entry after the lstat gains nothing.
  if (::fstat(fd.get(), &st) != 0)
    return IoError(errno, "stat", QuoteForMessage(path, 200)).WithReason(reason::kUnreadable);
  if (!S_ISREG(st.st_mode))
    return Refused(reason::kNotRegular, path, "is not a regular file");
  if (owner != nullptr)
    *owner = st.st_uid;
  if (!limits.any_owner && st.st_uid != limits.expected_uid) {
    return Refused(reason::kWrongOwner, path,
                   "owned by uid " + std::to_string(st.st_uid) + ", expected uid " +
                       std::to_string(limits.expected_uid));
  }
  // A second link could be a name the writer never meant to hand over (another host's
  // file, or one outside the spool); deleting our name would not remove the data either.
  if (st.st_nlink != 1)
    return Refused(reason::kHardlink, path, std::to_string(st.st_nlink) + " links");
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    return Refused(reason::kTooLarge, path,
                   std::to_string(st.st_size) + " bytes exceed the " +
                       std::to_string(limits.max_bytes) + "-byte cap");
  }
  // One byte more than fstat promised shows a file that is still growing; it may keep
  // growing, but never past cap + 1 bytes of reading.
  const uint64_t hard_limit = limits.max_bytes + 1;
  uint64_t target = static_cast<uint64_t>(st.st_size) + 1;
  uint64_t got = 0;
  while (got < hard_limit) {
    if (buffer.size() < target)
      buffer.resize(target);
    const ssize_t n = ::read(fd.get(), buffer.data() + got, target - got);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return IoError(errno, "read", QuoteForMessage(path, 200)).WithReason(reason::kUnreadable);
    }
    if (n == 0)
      break;
    got += static_cast<uint64_t>(n);
    if (got == target)
      target = std::min(hard_limit, target * 2);
  }
  if (got > limits.max_bytes)
    return Refused(reason::kTooLarge, path, "grew past the byte cap while being read");
  return std::string_view(buffer.data(), got);
}

Result<fs::UniqueFd> OpenHostileDirectory(int parent_fd, std::string_view parent_path,
                                          std::string_view name, uid_t expected_uid) {
  const std::string path = fs::JoinPath(parent_path, name);
  const std::string name_string(name);
  struct stat st {};
  if (::fstatat(parent_fd, name_string.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return OpenError(errno, path);
  if (S_ISLNK(st.st_mode))
    return Refused(reason::kSymlink, path, "host directory is a symbolic link");
  if (!S_ISDIR(st.st_mode))
    return Refused(reason::kNotDirectory, path, "host entry is not a directory");
  fs::UniqueFd fd(::openat(parent_fd, name_string.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid())
    return OpenError(errno, path);
  if (::fstat(fd.get(), &st) != 0)
    return IoError(errno, "stat", QuoteForMessage(path, 200)).WithReason(reason::kUnreadable);
  if (st.st_uid != expected_uid) {
    return Refused(reason::kWrongOwner, path,
                   "host directory owned by uid " + std::to_string(st.st_uid) + ", expected uid " +
                       std::to_string(expected_uid));
  }
  return fd;
}

}  // namespace expanse::spool
