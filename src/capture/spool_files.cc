#include "capture/spool_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace expanse::capture {
namespace {

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string WriteSpoolFile(const std::string& dir, const std::string& name,
                           std::string_view content, uint64_t min_free_bytes) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0)
    return dir + ": " + std::strerror(errno);
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < min_free_bytes + content.size()) {
    return dir + ": only " + std::to_string(free_bytes >> 20) +
           " MiB free, not writing (the agent leaves at least " +
           std::to_string(min_free_bytes >> 20) + " MiB)";
  }
  const std::string path = dir + "/" + name;
  const std::string temporary = dir + "/." + name + ".tmp";
  const int fd =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return temporary + ": " + std::strerror(errno);
  // open() applied the process's umask; the sampler (another account) must be able to read.
  [[maybe_unused]] const int mode_set = fchmod(fd, 0644);
  const bool written = WriteAll(fd, content);
  const int saved = errno;
  close(fd);
  if (!written) {
    unlink(temporary.c_str());
    return temporary + ": " + std::strerror(saved);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = path + ": " + std::strerror(errno);
    unlink(temporary.c_str());
    return why;
  }
  return "";
}

void AppendSpoolLine(const std::string& dir, const std::string& name, const std::string& line) {
  const std::string path = dir + "/" + name;
  // O_NONBLOCK: someone else's FIFO under this name must not hang the job; then only a
  // regular file of our own is written to.
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return;
  }
  [[maybe_unused]] const int mode_set = fchmod(fd, 0644);
  WriteAll(fd, line + "\n");
  close(fd);
}

}  // namespace expanse::capture
