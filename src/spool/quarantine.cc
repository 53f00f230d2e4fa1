#include "spool/quarantine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "spool/fs_util.h"
#include "spool/spool_format.h"

namespace expanse::spool {
namespace {

constexpr size_t kMaxLeftLogged = 1000;

}  // namespace

Quarantine::Quarantine(int root_fd, std::string root_path, QuarantineOptions options, LogFn log)
    : root_fd_(root_fd),
      root_path_(std::move(root_path)),
      options_(options),
      log_(std::move(log)) {}

void Quarantine::BeginRound() {
  opened_ = false;
  dir_ = fs::UniqueFd();
}

void Quarantine::Open() {
  opened_ = true;
  entries_ = 0;
  bytes_ = 0;
  const auto unusable = [this](const std::string& why) {
    if (!unusable_logged_ && log_)
      log_("spool: quarantine " + fs::JoinPath(root_path_, kQuarantineDirName) + " unusable (" +
           why + "); refused spool entries are deleted instead");
    unusable_logged_ = true;
  };
  if (::mkdirat(root_fd_, kQuarantineDirName, 0700) != 0 && errno != EEXIST)
    return unusable(std::strerror(errno));
  // O_NOFOLLOW: a quarantine replaced by a symlink must not send files elsewhere.
  fs::UniqueFd fd(
      ::openat(root_fd_, kQuarantineDirName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid())
    return unusable(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid())
    return unusable("not owned by this process's user");
  Result<std::vector<std::string>> names =
      ToSpoolError(fs::ListDirectoryAt(fd.get(), fs::JoinPath(root_path_, kQuarantineDirName)));
  if (!names.ok())
    return unusable(names.status().message());
  for (const std::string& name : *names) {
    ++entries_;
    if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      bytes_ += static_cast<uint64_t>(st.st_size);
  }
  dir_ = std::move(fd);
  unusable_logged_ = false;
}

Quarantine::Outcome Quarantine::Dispose(int dir_fd, std::string_view entry,
                                        const std::string& target) {
  if (!opened_)
    Open();
  const std::string name_string(entry);
  struct stat st {};
  if (::fstatat(dir_fd, name_string.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Outcome::kDeleted : Outcome::kLeft;
  const uint64_t size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  if (dir_.valid() && entries_ < options_.max_entries && bytes_ + size <= options_.max_bytes) {
    // rename moves the entry itself: a symlink stays a symlink, its target is not touched.
    if (::renameat(dir_fd, name_string.c_str(), dir_.get(), target.c_str()) == 0) {
      ++entries_;
      bytes_ += size;
      return Outcome::kQuarantined;
    }
  }
  const int flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
  if (::unlinkat(dir_fd, name_string.c_str(), flags) == 0 || errno == ENOENT)
    return Outcome::kDeleted;
  const int err = errno;
  // A stuck entry is seen again every round; say so once.
  if (log_ && left_logged_.size() < kMaxLeftLogged && left_logged_.insert(target).second) {
    log_("spool: cannot quarantine (as " + target +
         ") or delete a refused entry: " + std::strerror(err));
  }
  return Outcome::kLeft;
}

}  // namespace expanse::spool
