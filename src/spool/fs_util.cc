#include "spool/fs_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "spool/spool_names.h"

namespace expanse::spool {

Status ToSpoolError(const Status& status) {
  if (status.ok())
    return status;
  std::string message = "spool: " + status.message();
  switch (status.code()) {
    case StatusCode::kResourceExhausted:
      return ResourceExhaustedError(std::move(message)).WithReason("spool_disk_full");
    case StatusCode::kNotFound:
      return NotFoundError(std::move(message));
    default:
      return UnavailableError(std::move(message)).WithReason("spool_io");
  }
}

Status IoError(int err, std::string_view what, std::string_view path) {
  std::string described(what);
  described += ' ';
  described += path;
  return ToSpoolError(fs::ErrnoStatus(err, described));
}

Result<fs::UniqueFd> OpenConfiguredDirectory(const std::string& path, bool create, mode_t mode) {
  if (create && ::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return IoError(errno, "create directory", path);
  fs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return IoError(errno, "open directory", path);
  return fd;
}

Status ReplaceFile(int dir_fd, std::string_view dir_path, const std::string& name,
                   std::string_view bytes, mode_t mode) {
  return ToSpoolError(
      fs::WriteFileAtomicallyAt(dir_fd, dir_path, name, TempFileName(name), bytes, mode));
}

Result<std::optional<std::string>> ReadLocalFile(int dir_fd, std::string_view dir_path,
                                                 std::string_view name, size_t max_bytes) {
  Result<std::optional<std::string>> contents =
      fs::ReadSmallFileAt(dir_fd, dir_path, name, max_bytes);
  if (!contents.ok() && contents.status().reason() == fs::kFileTooLargeReason) {
    return ResourceExhaustedError("spool: " + fs::JoinPath(dir_path, name) + " exceeds " +
                                  std::to_string(max_bytes) +
                                  " bytes; it is not a file Expanse wrote")
        .WithReason("spool_state_too_large");
  }
  return ToSpoolError(std::move(contents));
}

}  // namespace expanse::spool
