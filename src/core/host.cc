#include "core/host.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>
#include <vector>

#include "core/file_util.h"

extern char** environ;

namespace expanse {
using fs::ErrnoStatus;
using fs::SplitPath;

RealHost& RealHost::Get() {
  static RealHost host;
  return host;
}

namespace {

FileInfo InfoOf(const struct stat& st) {
  FileInfo info;
  info.type = S_ISREG(st.st_mode)   ? FileInfo::Type::kFile
              : S_ISDIR(st.st_mode) ? FileInfo::Type::kDirectory
              : S_ISLNK(st.st_mode) ? FileInfo::Type::kSymlink
                                    : FileInfo::Type::kOther;
  info.mode = st.st_mode & 07777;
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  info.size = static_cast<uint64_t>(st.st_size);
  return info;
}

}  // namespace

std::optional<FileInfo> RealHost::Stat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
  return InfoOf(st);
}

std::optional<FileInfo> RealHost::LinkStat(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return std::nullopt;
  return InfoOf(st);
}

Result<std::optional<std::string>> RealHost::ReadFile(const std::string& path, size_t max_bytes) {
  return fs::ReadSmallFile(path, max_bytes);
}

Status RealHost::WriteFile(const std::string& path, std::string_view bytes, mode_t mode, uid_t uid,
                           gid_t gid) {
  const auto [directory, name] = SplitPath(path);
  return fs::WriteFileAtomically(directory, name, std::string(bytes), mode, uid, gid);
}

Status RealHost::CopyLocalFile(const std::string& local_source, const std::string& path,
                               size_t max_bytes, mode_t mode, uid_t uid, gid_t gid) {
  const auto [directory, name] = SplitPath(path);
  return fs::CopyFileAtomically(local_source, directory, name, max_bytes, mode, uid, gid);
}

Status RealHost::AppendToFile(const std::string& path, std::string_view bytes, mode_t mode) {
  const bool created = !LinkStat(path).has_value();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return ErrnoStatus(errno, "open " + path);
  const bool written = fs::WriteFully(fd, bytes) && ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!written)
    return ErrnoStatus(error, "append to " + path);
  return created ? fs::SyncDirectory(SplitPath(path).first) : OkStatus();
}

Status RealHost::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return ErrnoStatus(errno, "remove " + path);
  return OkStatus();
}

Status RealHost::SetOwner(const std::string& path, uid_t uid, gid_t gid) {
  if (::lchown(path.c_str(), uid, gid) != 0)
    return ErrnoStatus(errno, "chown " + path);
  return OkStatus();
}

Status RealHost::MakeDirectories(const std::string& path, mode_t mode) {
  if (path.empty() || path.front() != '/')
    return InvalidArgumentError("mkdir: '" + path + "' is not an absolute path");
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), mode) == 0) {
      if (::chmod(prefix.c_str(), mode) != 0)  // exactly `mode`, whatever the umask
        return ErrnoStatus(errno, "chmod " + prefix);
    } else if (errno != EEXIST) {
      return ErrnoStatus(errno, "mkdir " + prefix);
    }
    if (slash == std::string::npos)
      break;
  }
  std::optional<FileInfo> info = Stat(path);
  if (!info || info->type != FileInfo::Type::kDirectory)
    return FailedPreconditionError(path + " exists and is not a directory");
  return OkStatus();
}

Status RealHost::RemoveDirectory(const std::string& path) {
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT)
    return OkStatus();
  if (errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR) {
    return FailedPreconditionError("remove directory " + path + ": " + std::strerror(errno))
        .WithReason("directory_not_empty");
  }
  return ErrnoStatus(errno, "remove directory " + path);
}

Result<std::vector<std::string>> RealHost::ListDirectory(const std::string& path) {
  Result<std::vector<std::string>> names = fs::ListDirectory(path);
  if (!names.ok() && names.status().code() == StatusCode::kNotFound)
    return std::vector<std::string>();
  if (names.ok())
    std::sort(names->begin(), names->end());
  return names;
}

Status RealHost::RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);  // removes links themselves, never their targets
  if (error)
    return InternalError("remove " + path + ": " + error.message());
  return OkStatus();
}

Status RealHost::Rename(const std::string& from, const std::string& to) {
  if (!LinkStat(from))
    return NotFoundError("rename " + from + ": No such file or directory");
  if (LinkStat(to))
    return FailedPreconditionError("rename " + from + " to " + to + ": " + to + " exists");
  if (::rename(from.c_str(), to.c_str()) != 0)
    return ErrnoStatus(errno, "rename " + from + " to " + to);
  return fs::SyncDirectory(SplitPath(to).first);
}

Result<SubprocessResult> RealHost::Run(const SubprocessOptions& options) {
  return RunSubprocess(options);
}

Status RealHost::SignalProcess(pid_t pid, int signal) {
  if (::kill(pid, signal) != 0)
    return errno == ESRCH ? NotFoundError("no process " + std::to_string(pid))
                          : ErrnoStatus(errno, "signal process " + std::to_string(pid));
  return OkStatus();
}

void RealHost::Sleep(std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); }

std::optional<std::string> RealHost::GetEnv(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr)
    return std::nullopt;
  return std::string(value);
}

std::map<std::string, std::string> RealHost::Environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos)
      out.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

std::optional<UserAccount> RealHost::LookupUser(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return UserAccount{name, pw.pw_uid, pw.pw_gid};
}

}  // namespace expanse
