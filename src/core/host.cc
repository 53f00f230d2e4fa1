#include "core/host.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/file_util.h"

extern char** environ;

namespace expanse {
namespace {

Status ErrnoStatus(int error, const std::string& what) {
  std::string message = what + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
      return NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message));
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

}  // namespace

RealHost& RealHost::Get() {
  static RealHost host;
  return host;
}

std::optional<FileInfo> RealHost::Stat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
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

Result<std::optional<std::string>> RealHost::ReadFile(const std::string& path, size_t max_bytes) {
  return fs::ReadSmallFile(path, max_bytes);
}

Status RealHost::WriteFile(const std::string& path, std::string_view bytes, mode_t mode, uid_t uid,
                           gid_t gid) {
  const auto [directory, name] = SplitPath(path);
  return fs::WriteFileAtomically(directory, name, std::string(bytes), mode, uid, gid);
}

Status RealHost::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return ErrnoStatus(errno, "remove " + path);
  return OkStatus();
}

Status RealHost::MakeDirectories(const std::string& path, mode_t mode) {
  return fs::MakeDirectories(path, mode);
}

Status RealHost::RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);  // removes links themselves, never their targets
  if (error)
    return InternalError("remove " + path + ": " + error.message());
  return OkStatus();
}

Result<SubprocessResult> RealHost::Run(const SubprocessOptions& options) {
  return RunSubprocess(options);
}

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
