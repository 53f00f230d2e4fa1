// The static release mirror: GET /releases/<name> serves the files of --releases-dir as they
// are (manifest.json, archives, their .sig files), read-only. Installers verify everything they
// fetch, so the mirror needs no authentication; it must only never serve anything but the
// regular files directly inside that directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "deploy/cli_installer.h"
#include "http/error.h"
#include "server/control_plane.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

// The largest file served: release archives stay below this (see src/release/manifest.h).
constexpr off_t kMaxServedBytes = off_t{1} << 30;
constexpr char kMirrorKeyName[] = "release.pub";

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// One path segment of [A-Za-z0-9._-], not a dotfile (so not "." or ".." either).
bool IsServableName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.')
    return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

http::Response NotFound() { return http::ErrorResponse(404, "not_found", "no such release file"); }

http::Response ServeFile(const std::string& dir, std::string_view name) {
  if (!IsServableName(name))
    return NotFound();
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0)
    return http::ErrorResponse(503, "unavailable", "the release directory cannot be opened");
  // O_NOFOLLOW: a symlink is never followed out of the directory; O_NONBLOCK: a FIFO cannot
  // hold a worker (it is then refused as not regular).
  Fd fd(::openat(dir_fd.get(), std::string(name).c_str(),
                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0)
    return NotFound();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxServedBytes)
    return NotFound();
  std::string body;
  body.reserve(static_cast<size_t>(st.st_size));
  char buffer[64 << 10];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return http::ErrorResponse(500, "internal", "reading the release file failed");
    if (n == 0)
      break;
    body.append(buffer, static_cast<size_t>(n));
    if (body.size() > static_cast<size_t>(kMaxServedBytes))
      return NotFound();
  }
  http::Response response;
  response.status = 200;
  response.content_type = name.ends_with(".json") ? "application/json" : "application/octet-stream";
  response.body = std::move(body);
  // One byte range per request (an interrupted download resumes); the listener answers more
  // ranges, or ranges on anything not marked so, with the whole file (http/listener_handlers.cc).
  response.headers.emplace_back("Accept-Ranges", "bytes");
  return response;
}

// The mirror's public key, which the mirror's operator puts there (docs/install.md, "Getting
// the CLI"): read like any served file, never through a link.
Result<std::string> MirrorKey(const std::string& dir) {
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0)
    return UnavailableError("the release directory cannot be opened");
  Result<std::optional<std::string>> pem =
      fs::ReadSmallFileAt(dir_fd.get(), dir, kMirrorKeyName, 4096);
  if (!pem.ok() || !*pem) {
    return NotFoundError("the release mirror has no readable " + std::string(kMirrorKeyName) +
                         " (the public key that signs it)")
        .WithReason("no_release_key");
  }
  return std::move(**pem);
}

// The installer script for this mirror, or why there is none.
Result<std::string> CliInstaller(const std::string& dir, const ControlPlane& control) {
  deploy::CliInstallerValues values;
  values.base_url = control.options().control_plane_url;
  EXPANSE_ASSIGN_OR_RETURN(values.key_pem, MirrorKey(dir));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names, fs::ListDirectory(dir));
  values.archives = deploy::PickCliArchives(names);
  return deploy::RenderCliInstaller(values);
}

}  // namespace

std::string CliInstallLineFor(const std::string& releases_dir, const ControlPlane& control) {
  if (releases_dir.empty() || !CliInstaller(releases_dir, control).ok())
    return "";
  return deploy::CliInstallLine(control.options().control_plane_url);
}

Status RegisterReleaseMirrorRoutes(http::Listener& listener, const std::string& releases_dir,
                                   const ControlPlane& control) {
  struct stat st {};
  if (::stat(releases_dir.c_str(), &st) != 0) {
    return InvalidArgumentError("--releases-dir " + releases_dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return InvalidArgumentError("--releases-dir " + releases_dir + " is not a directory");
  listener.Get("/releases/:name", [releases_dir](const http::Request& request) {
    return ServeFile(releases_dir, request.PathParam("name"));
  });
  // No authentication, like the mirror: the script holds nothing secret, and it verifies what
  // it downloads with the key it carries.
  listener.Get("/install", [releases_dir, &control](const http::Request&) {
    Result<std::string> script = CliInstaller(releases_dir, control);
    if (!script.ok())
      return http::ErrorResponse(script.status());
    http::Response response;
    response.status = 200;
    response.content_type = "text/x-shellscript; charset=utf-8";
    response.body = std::move(*script);
    return response;
  });
  return OkStatus();
}

}  // namespace expanse::server
