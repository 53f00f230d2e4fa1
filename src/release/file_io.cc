#include "release/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <utility>

#include "core/file_util.h"

namespace expanse::release_internal {

Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  // Paths the operator names on the command line: a pipe (a key from <(vault read ...)) is
  // read to its end.
  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> contents,
      fs::ReadSmallFile(path, max_bytes, fs::Symlinks::kFollow, fs::Pipes::kRead));
  if (!contents)
    return NotFoundError(path + " does not exist");
  return std::move(*contents);
}

Result<std::string> ReadStagedFile(const std::string& path, size_t max_bytes) {
  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> contents,
      fs::ReadSmallFile(path, max_bytes, fs::Symlinks::kFollow, fs::Pipes::kRefuse));
  if (!contents)
    return NotFoundError(path + " does not exist");
  return std::move(*contents);
}

Status ReplaceFile(const std::string& path, std::string_view contents, mode_t mode) {
  auto [dir, name] = fs::SplitPath(path);
  return fs::WriteFileAtomically(dir, name, std::string(contents), mode);
}

Status CreateNewFile(const std::string& path, std::string_view contents, mode_t mode) {
  fs::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) {
    if (errno == EEXIST)
      return AlreadyExistsError(path + " already exists; refusing to overwrite it");
    return fs::ErrnoStatus(errno, "create " + path);
  }
  // The umask may have narrowed `mode`; a key's mode is exactly what we ask for.
  if (::fchmod(fd.get(), mode) != 0 || !fs::WriteFully(fd.get(), contents) ||
      ::fsync(fd.get()) != 0) {
    Status status = fs::ErrnoStatus(errno, "write " + path);
    ::unlink(path.c_str());
    return status;
  }
  return OkStatus();
}

}  // namespace expanse::release_internal
